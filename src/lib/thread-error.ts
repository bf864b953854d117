/** A failure as a worker thread sends it: the message, and SQLite's (or Node's) code if any. */
export interface ThreadError {
  message: string;
  code?: string;
}

/** What a thread posts for a failure: an Error does not cross whole, and its code matters. */
export function threadError(e: unknown): ThreadError {
  const { message, code } = (e ?? {}) as { message?: unknown; code?: unknown };
  return { message: String(message ?? e), ...(typeof code === 'string' ? { code } : {}) };
}

/**
 * The failure again as an Error with its code, so a busy or unreadable SQLite file is still
 * told apart from a bug on this side (sqliteOutage).
 */
export const fromThreadError = (e: ThreadError): Error =>
  Object.assign(new Error(e.message), e.code === undefined ? {} : { code: e.code });
