/** A thread's failure crosses as a message and code and comes back an Error with that code. */
import { fromThreadError, threadError } from '../../src/lib/thread-error';

test('keeps the message and a string code, and nothing else', () => {
  const sqlite = Object.assign(new Error('unable to open database file'), {
    code: 'SQLITE_CANTOPEN',
  });
  const back = fromThreadError(structuredClone(threadError(sqlite)));
  expect(back).toBeInstanceOf(Error);
  expect(back).toMatchObject({ message: 'unable to open database file', code: 'SQLITE_CANTOPEN' });
  expect(threadError(Object.assign(new Error('x'), { code: 7 }))).toEqual({ message: 'x' });
  expect('code' in fromThreadError(threadError(new Error('plain')))).toBe(false);
  expect(threadError('thrown string')).toEqual({ message: 'thrown string' });
  expect(threadError(undefined)).toEqual({ message: 'undefined' });
});
