import { ApiError } from '../api';

/** An API or client error as one readable line (with the request id, for a bug report). */
export function ErrorBanner({ error }: { error: unknown }) {
  if (!error) return null;
  const e = error instanceof ApiError ? error : undefined;
  const message = error instanceof Error ? error.message : String(error);
  return (
    <p class="error-banner" role="alert">
      {e && e.status ? <strong>{e.code}: </strong> : null}
      {message}
      {e?.requestId ? <span class="muted"> (request {e.requestId})</span> : null}
    </p>
  );
}
