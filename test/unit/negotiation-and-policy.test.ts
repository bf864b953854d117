import { publicOnly } from '../../src/adapters/images/address-policy';
import { sniffFormat } from '../../src/adapters/images/sharp-analyzer';
import { checkAccept } from '../../src/api/http/negotiation';
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
    ['127.0.0.1', 'IPv4 loopback'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.169.254', 'link-local (cloud metadata)'],
    ['100.64.0.1', 'carrier-grade NAT'],
    ['0.0.0.0', 'unspecified'],
    ['255.255.255.255', 'broadcast'],
    ['224.0.0.1', 'multicast'],
    ['192.0.2.1', 'documentation (TEST-NET-1)'],
    ['198.51.100.1', 'documentation (TEST-NET-2)'],
    ['203.0.113.1', 'documentation (TEST-NET-3)'],
    ['198.18.0.1', 'benchmarking'],
    ['240.0.0.1', 'reserved'],
    ['::1', 'IPv6 loopback'],
    ['::', 'IPv6 unspecified'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'link-local with a zone'],
    ['fec0::1', 'site-local (deprecated)'],
    ['fc00::1', 'unique-local'],
    ['fd12:3456::1', 'unique-local'],
    ['ff02::1', 'multicast'],
    ['ff0e::1', 'global-scope multicast'],
    ['2001:db8::1', 'documentation'],
    ['3fff::1', 'documentation (RFC 9637)'],
    ['2001:2::1', 'benchmarking'],
    ['100::1', 'discard-only'],
    ['::ffff:127.0.0.1', 'IPv4-mapped loopback'],
    ['::ffff:7f00:1', 'IPv4-mapped loopback, hex'],
    ['::ffff:10.0.0.1', 'IPv4-mapped private'],
    ['::ffff:169.254.169.254', 'IPv4-mapped link-local'],
    ['::7f00:1', 'IPv4-compatible loopback (what [::127.0.0.1] becomes)'],
    ['::127.0.0.1', 'IPv4-compatible loopback, dotted'],
    ['::a00:1', 'IPv4-compatible private'],
    ['::808:808', 'IPv4-compatible (deprecated, even with a public IPv4)'],
    ['::8.8.8.8', 'IPv4-compatible, dotted'],
    ['::ffff:0:7f00:1', 'IPv4-translated (RFC 6145)'],
    ['64:ff9b::7f00:1', 'NAT64 well-known prefix with loopback'],
    ['64:ff9b::10.0.0.1', 'NAT64 well-known prefix with private'],
    ['64:ff9b::a9fe:a9fe', 'NAT64 well-known prefix with link-local'],
    ['64:ff9b:1::808:808', 'NAT64 local-use prefix (translator is a local choice)'],
    ['64:ff9b:1:7f00:1::', 'NAT64 local-use prefix with loopback'],
    ['2002:7f00:1::1', '6to4 with loopback'],
    ['2002:a00:1::1', '6to4 with private'],
    ['2002:c0a8:101::1', '6to4 with private'],
    ['2001::1', 'Teredo'],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'Teredo'],
    ['4000::1', 'outside global unicast 2000::/3'],
    ['not-an-ip', 'not an address'],
    ['', 'empty'],
  ])('refuses %s (%s)', (ip) => expect(publicOnly(ip)).toBe(false));
  it.each([
    ['93.184.216.34', 'public IPv4'],
    ['8.8.8.8', 'public IPv4'],
    ['2606:4700:4700::1111', 'public IPv6'],
    ['2a00:1450:4001:80b::200e', 'public IPv6'],
    ['::ffff:8.8.8.8', 'IPv4-mapped public'],
    ['64:ff9b::808:808', 'NAT64 well-known prefix with public IPv4'],
    ['64:ff9b::8.8.8.8', 'NAT64 well-known prefix with public IPv4, dotted'],
    ['2002:808:808::1', '6to4 with public IPv4'],
  ])('allows %s (%s)', (ip) => expect(publicOnly(ip)).toBe(true));
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
    // one character changed (a random token ends in 'x' once in 62 draws: then another one)
    const changed = a.token.slice(0, -1) + (a.token.endsWith('x') ? 'y' : 'x');
    expect(tokenEquals(changed, a.record.hash)).toBe(false);
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
  it('keeps keys named like object internals as keys', () => {
    const v = parseActionVars('__proto__:x,constructor:y,toString:z');
    expect(Object.keys(v)).toEqual(['__proto__', 'constructor', 'toString']);
    expect(JSON.parse(JSON.stringify(v))).toEqual({
      ['__proto__']: 'x',
      constructor: 'y',
      toString: 'z',
    });
  });
  it('names the position of a malformed pair', () => {
    expect(() => parseActionVars('a:1,broken')).toThrow(
      expect.objectContaining({ details: [expect.objectContaining({ param: 'v', position: 4 })] }),
    );
  });
});
