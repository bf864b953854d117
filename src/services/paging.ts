import { invalid } from '../domain/errors';
import { LIMITS } from '../domain/limits';

const bad = (param: string, message: string) =>
  invalid(`${param}: ${message}`, [{ param, message }]);

/** limit/offset listing (GET content, errors). */
export function pageWindow(
  q: { limit?: number; offset?: number },
  defLimit: number,
  min: number,
  max: number,
): { offset: number; limit: number } {
  const limit = q.limit ?? defLimit;
  const offset = q.offset ?? 0;
  if (!Number.isInteger(limit) || limit < min || limit > max)
    throw bad('limit', `must be an integer from ${min} to ${max}`);
  if (!Number.isInteger(offset) || offset < 0) throw bad('offset', 'must be an integer ≥ 0');
  return { offset, limit };
}

/** page/limit for the Vision API: limit 2..50, and no further than the 10,000th result. */
export function visionPage(q: { page?: number; limit?: number }): {
  page: number;
  limit: number;
  offset: number;
} {
  const limit = q.limit ?? LIMITS.pageSizeDefault;
  const page = q.page ?? 1;
  if (!Number.isInteger(limit) || limit < LIMITS.pageSizeMin || limit > LIMITS.pageSizeMax)
    throw bad('limit', `must be an integer from ${LIMITS.pageSizeMin} to ${LIMITS.pageSizeMax}`);
  if (!Number.isInteger(page) || page < 1) throw bad('page', 'must be an integer ≥ 1');
  if (page * limit > LIMITS.maxResultWindow)
    throw bad(
      'page',
      `page × limit is ${page * limit}; results are available up to the ${LIMITS.maxResultWindow}th`,
    );
  return { page, limit, offset: (page - 1) * limit };
}
