import crypto from 'node:crypto';

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;

/** The client's X-Request-Id when it is a safe token to echo, else a fresh one. */
export const requestIdFrom = (given: unknown): string =>
  typeof given === 'string' && REQUEST_ID.test(given) ? given : crypto.randomUUID();
