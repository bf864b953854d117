import { publicOnly } from '../../src/adapters/images/address-policy';
import { sniffFormat } from '../../src/adapters/images/sharp-analyzer';
import { checkAccept } from '../../src/api/rest/negotiation';
import { parseActionVars } from '../../src/domain/action-vars';
import { browseToken, issueToken, parseToken, tokenEquals } from '../../src/services/tokens';

describe('Accept negotiation', () => {
  it.each([
    undefined,
    '',
    '*/*',
    'application/json',
    'application/vnd.service.v2+json',
    'application/vnd.visii.v2+json',
    'text/html, */*;q=0.8',
    'application/vnd.service.v3+json, application/json',
  ])('serves v2 for %s', (h) => expect(() => checkAccept(h)).not.toThrow());
  it.each(['application/vnd.service.v1+json', 'application/vnd.visii.v3+json'])(
    'refuses %s with 406',
    (h) => {
      expect(() => checkAccept(h)).toThrow(
        expect.objectContaining({ status: 406, code: 'unsupported_version' }),
      );
    },
  );
});

describe('address policy', () => {
  it.each([
    '127.0.0.1',
    '10.1.2.3',
    '172.16.0.1',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '224.0.0.1',
    '::1',
    'fe80::1',
    'fc00::1',
    '::ffff:127.0.0.1',
    '::ffff:10.0.0.1',
    'not-an-ip',
  ])('refuses %s', (ip) => expect(publicOnly(ip)).toBe(false));
  it.each(['93.184.216.34', '8.8.8.8', '2606:4700:4700::1111', '::ffff:8.8.8.8'])(
    'allows %s',
    (ip) => expect(publicOnly(ip)).toBe(true),
  );
});

describe('format sniffing', () => {
  it('decides from magic bytes', () => {
    expect(sniffFormat(Buffer.from([0xff, 0xd8, 0xff, 0xe0]))).toBe('jpeg');
    expect(sniffFormat(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))).toBe('png');
    expect(sniffFormat(Buffer.from('GIF89a....'))).toBe('gif');
    expect(sniffFormat(Buffer.from('<html>'))).toBe('html or svg');
  });
});

describe('tokens', () => {
  it('issues prefixed random tokens and verifies them by hash', () => {
    const a = issueToken('org', { org: 'acme' }, new Date());
    expect(a.token).toMatch(/^org_[A-Za-z0-9]{12}_[A-Za-z0-9]{32}$/);
    expect(parseToken(a.token)).toEqual({ kind: 'org', prefix: a.record.prefix });
    expect(a.record.hash).not.toContain(a.token);
    expect(tokenEquals(a.token, a.record.hash)).toBe(true);
    expect(tokenEquals(a.token.slice(0, -1) + 'x', a.record.hash)).toBe(false);
    expect(issueToken('org', {}, new Date()).token).not.toBe(a.token);
  });
  it('derives browse tokens: stable per rotation, different after rotating', () => {
    const key = Buffer.alloc(32, 7);
    const t0 = browseToken(key, 'o', 'id', 0, new Date()).token;
    expect(browseToken(key, 'o', 'id', 0, new Date()).token).toBe(t0);
    expect(browseToken(key, 'o', 'id', 1, new Date()).token).not.toBe(t0);
    expect(parseToken(t0)?.kind).toBe('ds');
  });
});

describe('action variables (v)', () => {
  it('parses key:value pairs, keeping colons inside values', () => {
    expect(parseActionVars('a:exit,id:abc-123,url:http://x')).toEqual({
      a: 'exit',
      id: 'abc-123',
      url: 'http://x',
    });
  });
  it('names the position of a malformed pair', () => {
    expect(() => parseActionVars('a:1,broken')).toThrow(
      expect.objectContaining({ details: [expect.objectContaining({ param: 'v', position: 4 })] }),
    );
  });
});
