import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { Api, ApiError, OrgApi, VisionApi, type Dataset } from './api';
import { allowedBy, decodeScoped, expiryOf, isScopedToken, type ScopedPayload } from './lib/scoped';
import {
  addressOf,
  duplicatesAddress,
  navigate,
  readDuplicates,
  readLocation,
} from './lib/url-state';
import { clearSession, loadSession, saveSession, takeFragment, type Session } from './session';
import { Catalogue } from './views/catalogue';
import { Duplicates } from './views/duplicates';
import { ScopeNotice, expiredMessage } from './views/scope-notice';
import { OrgView } from './views/org-view';
import { SignIn } from './views/sign-in';

type Who =
  | { kind: 'org'; org: string }
  | { kind: 'dataset'; org: string; dataset: string }
  /** A scoped token (contract §16): its dataset's catalogue only, within its scope. */
  | { kind: 'scoped'; org: string; dataset: string; scope: ScopedPayload }
  | { kind: 'operator' };

/**
 * What a token can do is asked of the API: GraphQL `viewer` names the organisation (and, for a
 * dataset token, the dataset). The link hints (`#…&org=…&dataset=…`) are used only when the
 * API cannot answer that question.
 */
async function identify(s: Session): Promise<Who> {
  if (isScopedToken(s.token)) return identifyScoped(s);
  try {
    const v = await new Api(s.token).viewer();
    if (v.kind === 'ORGANISATION' && v.organisation) return { kind: 'org', org: v.organisation };
    if (v.kind === 'DATASET' && v.organisation && v.dataset)
      return { kind: 'dataset', org: v.organisation, dataset: v.dataset };
    if (v.kind === 'OPERATOR') return { kind: 'operator' };
    throw new ApiError(404, 'not_found', 'this token has no dataset any more');
  } catch (e) {
    const refused = e instanceof ApiError && (e.status === 401 || e.code === 'unauthorized');
    if (!refused && s.org && s.dataset) return { kind: 'dataset', org: s.org, dataset: s.dataset };
    if (!refused && s.org) return { kind: 'org', org: s.org };
    throw e;
  }
}

/**
 * A scoped token names no dataset (GraphQL `viewer` says only `SCOPED`, without checking the
 * signature, which needs the dataset's key): the link's hints do. One free Vision request on that
 * dataset (`content/fields`, always allowed) checks the signature and the expiry there, so a
 * changed or revoked link, or one opened with the wrong dataset, is refused before any page.
 */
async function identifyScoped(s: Session): Promise<Who> {
  const scope = decodeScoped(s.token);
  if (!scope) throw new Error('This is not a valid scoped token.');
  const expires = expiryOf(scope);
  if (expires && expires.getTime() <= Date.now()) throw new Error(expiredMessage(expires));
  if (!s.org || !s.dataset)
    throw new Error(
      'A scoped token works only from the link it was shared with (…#token=…&org=…&dataset=…): the token itself names no dataset.',
    );
  try {
    await new VisionApi(new Api(s.token), s.org, s.dataset).fieldNames();
  } catch (e) {
    if (e instanceof ApiError && e.code === 'token_expired')
      throw new Error(expiredMessage(expires), { cause: e });
    // Refused (forged, signed before a rotation, another dataset's): said by the caller. Anything
    // else, a rate limit say, the catalogue's own requests will show.
    if (e instanceof ApiError && (e.status === 401 || e.status === 404)) throw e;
  }
  return { kind: 'scoped', org: s.org, dataset: s.dataset, scope };
}

export function App() {
  const [session, setSession] = useState<Session | undefined>(() => {
    const fromLink = takeFragment();
    if (fromLink) saveSession(fromLink);
    return fromLink ?? loadSession();
  });
  const [who, setWho] = useState<Who>();
  const [error, setError] = useState<unknown>();
  const [checking, setChecking] = useState(!!session);
  /** A dataset an organisation user opened to browse (with its browse token). */
  const [browsing, setBrowsing] = useState<Dataset>();
  const browsed = useRef<string | undefined>(undefined);
  browsed.current = browsing?.name;
  /** A dataset whose near-duplicate report an organisation user reviews (`?duplicates=`). */
  const [reviewing, setReviewing] = useState<string>();

  // A `#token=` link opened in a tab already on the console changes only the fragment.
  useEffect(() => {
    const onHash = () => {
      const fromLink = takeFragment();
      if (!fromLink) return;
      setWho(undefined);
      setBrowsing(undefined);
      setSession(fromLink);
    };
    window.addEventListener('hashchange', onHash);
    return () => window.removeEventListener('hashchange', onHash);
  }, []);

  useEffect(() => {
    if (!session) return;
    let live = true;
    setChecking(true);
    const scoped = isScopedToken(session.token);
    identify(session)
      .then((w) => {
        if (!live) return;
        setWho(w);
        setError(undefined);
        saveSession(session);
      })
      .catch((e: unknown) => {
        if (!live) return;
        clearSession();
        setSession(undefined);
        setError(
          e instanceof ApiError && (e.status === 401 || (e.status === 404 && scoped))
            ? new Error(
                scoped
                  ? 'This link is not accepted: it was changed or made for another dataset, or the dataset’s browse token was rotated since it was made.'
                  : 'This token is not accepted (unknown or revoked).',
              )
            : e,
        );
      })
      .finally(() => live && setChecking(false));
    return () => {
      live = false;
    };
  }, [session]);

  const api = useMemo(() => (session ? new Api(session.token) : undefined), [session]);
  const orgApi = useMemo(
    () => (api && who?.kind === 'org' ? new OrgApi(api, who.org) : undefined),
    [api, who],
  );
  const vision = useMemo(() => {
    if (browsing && orgApi)
      return new VisionApi(new Api(browsing.browse_token), orgApi.org, browsing.name);
    if (api && (who?.kind === 'dataset' || who?.kind === 'scoped'))
      return new VisionApi(api, who.org, who.dataset);
    return undefined;
  }, [api, who, orgApi, browsing]);

  // The dataset an organisation user browses is in the address (`?dataset=`), so a reload, a
  // shared link and back/forward open it again; its browse token comes from the dataset list.
  useEffect(() => {
    if (!orgApi) return;
    let live = true;
    const follow = () => {
      const name = readLocation().dataset;
      if (name === browsed.current) return;
      if (!name) {
        setBrowsing(undefined);
        return;
      }
      orgApi
        .listDatasets()
        .then((list) => live && setBrowsing(list.find((d) => d.name === name)))
        // The organisation view lists the datasets too, and shows why that fails.
        .catch(() => live && setBrowsing(undefined));
    };
    follow();
    window.addEventListener('popstate', follow);
    return () => {
      live = false;
      window.removeEventListener('popstate', follow);
    };
  }, [orgApi]);
  const browse = (d: Dataset | undefined) => {
    navigate(addressOf(d?.name), 'push');
    setBrowsing(d);
  };

  // The duplicate report open is in the address too (`?duplicates=`); it needs only its name.
  useEffect(() => {
    if (!orgApi) return;
    const follow = () => setReviewing(readDuplicates().dataset);
    follow();
    window.addEventListener('popstate', follow);
    return () => window.removeEventListener('popstate', follow);
  }, [orgApi]);
  const review = (name: string | undefined) => {
    navigate(name ? duplicatesAddress(name) : addressOf(), 'push');
    setReviewing(name);
  };

  const signOut = () => {
    clearSession();
    setSession(undefined);
    setWho(undefined);
    setBrowsing(undefined);
    setError(undefined);
  };

  let body;
  if (!session || !who)
    body = checking ? (
      <p class="muted" role="status">
        Checking the token…
      </p>
    ) : (
      <SignIn
        busy={checking}
        error={error}
        onToken={(token) => {
          setError(undefined);
          setSession({ token });
        }}
      />
    );
  else if (vision && who.kind === 'scoped')
    body = (
      <>
        <ScopeNotice scope={who.scope} />
        <Catalogue
          key={`${vision.org}/${vision.dataset}/${vision.api.token}`}
          vision={vision}
          allowed={allowedBy(who.scope)}
        />
      </>
    );
  else if (vision)
    body = (
      <Catalogue
        key={`${vision.org}/${vision.dataset}/${vision.api.token}`}
        vision={vision}
        onBack={browsing ? () => browse(undefined) : undefined}
      />
    );
  else if (orgApi && reviewing)
    body = (
      <Duplicates
        key={`${orgApi.org}/${reviewing}`}
        orgApi={orgApi}
        dataset={reviewing}
        onBack={() => review(undefined)}
      />
    );
  else if (orgApi) body = <OrgView orgApi={orgApi} onBrowse={browse} onDuplicates={review} />;
  else
    body = (
      <section class="panel">
        <h1>Operator token</h1>
        <p>
          The console works with an organisation token or a dataset&apos;s browse token. With the
          operator token, create an organisation (<code>POST /orgs</code>) and sign in with the
          token it returns.
        </p>
      </section>
    );

  return (
    <>
      <header class="topbar">
        <a class="brand" href="/">
          Visual search
        </a>
        {who ? (
          <span class="who" data-kind={who.kind}>
            {who.kind === 'org'
              ? `organisation ${who.org}`
              : who.kind === 'dataset'
                ? `dataset ${who.org}/${who.dataset}`
                : who.kind === 'scoped'
                  ? `shared link ${who.org}/${who.dataset}`
                  : 'operator'}
          </span>
        ) : null}
        <nav class="topnav" aria-label="Service">
          <a href="/graphql">GraphQL</a>
          {session ? (
            <button type="button" class="secondary small" onClick={signOut}>
              Sign out
            </button>
          ) : null}
        </nav>
      </header>
      <main id="main">{body}</main>
    </>
  );
}
