import { ApiError } from '../api';

/**
 * What a refusal means for the person at the console, where the service's message alone would
 * not say what to do: an expired link, a request the token's scope does not allow, a rate limit
 * (with when to try again).
 */
function explain(e: ApiError): string | undefined {
  if (e.code === 'token_expired')
    return 'This link has expired. Ask whoever shared it for a new one.';
  if (e.status === 429) {
    const wait =
      e.retryAfter !== undefined
        ? ` Try again in ${e.retryAfter} second${e.retryAfter === 1 ? '' : 's'}.`
        : ' Try again in a moment.';
    return `Too many requests with this token.${wait}`;
  }
  if (e.status === 403 && e.code === 'forbidden') return 'This token does not allow that request.';
  return undefined;
}

/** An API or client error as one readable line (with the request id, for a bug report). */
export function ErrorBanner({ error }: { error: unknown }) {
  if (!error) return null;
  const e = error instanceof ApiError ? error : undefined;
  const message = error instanceof Error ? error.message : String(error);
  const meaning = e ? explain(e) : undefined;
  return (
    <p
      class="error-banner"
      role="alert"
      data-code={e?.code}
      data-retry-after={e?.retryAfter !== undefined ? e.retryAfter : undefined}
    >
      {e && e.status ? <strong>{e.code}: </strong> : null}
      {meaning ? (
        <>
          {meaning} <span class="muted">({message})</span>
        </>
      ) : (
        message
      )}
      {e?.requestId ? <span class="muted"> (request {e.requestId})</span> : null}
    </p>
  );
}
