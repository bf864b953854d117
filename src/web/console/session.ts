/**
 * The signed-in token. It arrives pasted, or in a link's fragment (`/#token=…`, which browsers
 * never send to the server); the fragment is removed from the address bar as soon as it is read,
 * and the token is kept in sessionStorage (this tab only, gone when it closes).
 */

const KEY = 'vss-console-session';

export interface Session {
  token: string;
  /** Hints from the link (`#token=…&org=…&dataset=…`), used only if the API cannot say. */
  org?: string;
  dataset?: string;
}

/** Reads `#token=…` once and strips the fragment (history.replaceState: no reload, no entry). */
export function takeFragment(): Session | undefined {
  const hash = location.hash.replace(/^#/, '');
  if (!hash) return undefined;
  const p = new URLSearchParams(hash);
  const token = p.get('token')?.trim();
  if (!token) return undefined;
  history.replaceState(history.state, '', location.pathname + location.search);
  return {
    token,
    ...(p.get('org') ? { org: p.get('org')! } : {}),
    ...(p.get('dataset') ? { dataset: p.get('dataset')! } : {}),
  };
}

export function loadSession(): Session | undefined {
  try {
    const raw = sessionStorage.getItem(KEY);
    const s = raw ? (JSON.parse(raw) as Session) : undefined;
    return s && typeof s.token === 'string' && s.token ? s : undefined;
  } catch {
    return undefined;
  }
}

export function saveSession(s: Session): void {
  sessionStorage.setItem(KEY, JSON.stringify(s));
}

export function clearSession(): void {
  sessionStorage.removeItem(KEY);
}
