import { useEffect, useState } from 'preact/hooks';
import { expiryOf, formatWhen, REQUEST_TYPES, type ScopedPayload } from '../lib/scoped';

/** What an expired link says, wherever the console finds out (its payload, or a 401). */
export const expiredMessage = (at?: Date): string =>
  `This link has expired${at ? ` (${formatWhen(at)})` : ''}. Ask whoever shared it for a new one.`;

// setTimeout's longest delay (about 24.8 days); a later expiry is checked again then.
const MAX_DELAY = 2 ** 31 - 1;

/**
 * Above the catalogue of a shared scoped link (contract §16): what the link shows (its filter,
 * fields and request types, read from the token's payload, which is not secret) and until when;
 * when that time comes, that it has expired, without waiting for a request to fail.
 */
export function ScopeNotice({ scope }: { scope: ScopedPayload }) {
  const expires = expiryOf(scope);
  const [expired, setExpired] = useState(() => !!expires && expires.getTime() <= Date.now());
  useEffect(() => {
    if (!expires || expired) return;
    let timer: ReturnType<typeof setTimeout>;
    const wait = () => {
      const left = expires.getTime() - Date.now();
      if (left <= 0) setExpired(true);
      else timer = setTimeout(wait, Math.min(left + 250, MAX_DELAY));
    };
    wait();
    return () => clearTimeout(timer);
  }, [expires?.getTime(), expired]);

  if (expired)
    return (
      <p class="error-banner scope-expired" role="alert" data-testid="scope-expired">
        {expiredMessage(expires)}
      </p>
    );
  const types = scope.types ?? REQUEST_TYPES;
  return (
    <p class="notice scope-notice" role="status" data-testid="scope-notice">
      <strong>Shared link.</strong>{' '}
      {scope.q ? (
        <>
          Only items matching <code data-testid="scope-q">{scope.q}</code>.{' '}
        </>
      ) : null}
      {scope.fields ? <>Fields: {scope.fields.join(', ')}. </> : null}
      {scope.types ? <>Allows {types.join(', ')}. </> : null}
      {expires ? (
        <span data-testid="scope-expires" data-exp={scope.exp}>
          Expires {formatWhen(expires)}.
        </span>
      ) : (
        'Does not expire.'
      )}
    </p>
  );
}
