import { AppError } from '../../domain/errors';

const VENDOR = /^application\/vnd\.[a-z0-9.-]+\.v(\d+)\+json$/i;

/**
 * Contract §1: v2 is chosen by `application/vnd.<vendor>.v2+json` (any vendor), `*∕*`,
 * `application/json`, or no Accept at all. A vendor type naming another version, with nothing
 * acceptable beside it, is 406.
 */
export function checkAccept(header: string | undefined): void {
  if (!header || header.trim() === '') return;
  let otherVersion: string | undefined;
  for (const part of header.split(',')) {
    const type = part.split(';')[0].trim().toLowerCase();
    const m = VENDOR.exec(type);
    if (m) {
      if (m[1] === '2') return;
      otherVersion ??= type;
    } else if (
      type === '*/*' ||
      type === 'application/*' ||
      type === 'application/json' ||
      type === ''
    )
      return;
  }
  if (otherVersion)
    throw new AppError(
      'unsupported_version',
      `media type ${otherVersion} is not served; use application/vnd.service.v2+json`,
    );
}
