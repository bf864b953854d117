import { useState } from 'preact/hooks';
import { ErrorBanner } from '../components/error-banner';

/** Paste a token: an organisation token (admin) or a dataset's browse token (catalogue). */
export function SignIn({
  onToken,
  error,
  busy,
}: {
  onToken: (token: string) => void;
  error?: unknown;
  busy: boolean;
}) {
  const [token, setToken] = useState('');
  return (
    <section class="panel sign-in" aria-labelledby="sign-in-title">
      <h1 id="sign-in-title">Sign in</h1>
      <p>
        Paste an <strong>organisation token</strong> (<code>org_…</code>) to manage datasets and
        follow usage, or a dataset&apos;s <strong>browse token</strong> (<code>ds_…</code>) to
        browse its catalogue. A shared link with a <strong>scoped token</strong> (<code>st_…</code>)
        opens its catalogue directly. The token stays in this tab (session storage) and is sent only
        to this service.
      </p>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (token.trim()) onToken(token.trim());
        }}
      >
        <label for="token">Token</label>
        <div class="token-row">
          <input
            id="token"
            class="mono"
            type="password"
            autocomplete="off"
            spellcheck={false}
            value={token}
            onInput={(e) => setToken(e.currentTarget.value)}
            required
          />
          <button type="submit" disabled={busy || !token.trim()}>
            {busy ? 'Checking…' : 'Sign in'}
          </button>
        </div>
      </form>
      <ErrorBanner error={error} />
      <p class="hint">
        A link of the form <code>{location.origin}/#token=…</code> signs in directly; the part after{' '}
        <code>#</code> never leaves the browser.
      </p>
    </section>
  );
}
