/** The generated operator token, on every engine, with two hosts starting at once. */
import { AuthService } from '../../src/services/auth';
import { ENGINES, twoHosts } from './engines';

describe.each(ENGINES)('operator token on %s', (_name, open) => {
  const hosts = twoHosts(open);

  test('of two hosts starting at once exactly one makes it, and both accept it', async () => {
    const [a, b] = [new AuthService(hosts.a.accounts), new AuthService(hosts.b.accounts)];
    const now = new Date('2026-01-01T00:00:00Z');
    const made = (
      await Promise.all([a.ensureOperatorToken(now), b.ensureOperatorToken(now)])
    ).filter((t): t is string => t !== undefined);
    expect(made).toHaveLength(1);
    for (const auth of [a, b])
      expect(await auth.authenticate(`token ${made[0]}`)).toEqual({ kind: 'operator' });
    // a later start makes none, and the other host's attempt left no second operator token
    expect(await a.ensureOperatorToken(now)).toBeUndefined();
    expect(
      await new AuthService(hosts.a.accounts, 'x'.repeat(20)).ensureOperatorToken(now),
    ).toBeUndefined();
  });
});
