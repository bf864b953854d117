import {
  allowListed,
  destinationKey,
  publicOnly,
  type AddressPolicy,
} from '../../src/adapters/images/address-policy';
import { loadConfig } from '../../src/config/env';

/** The policy the service builds from IMAGE_FETCH_ALLOW_HOSTS. */
const fromEnv = (value: string): AddressPolicy =>
  allowListed(loadConfig({ IMAGE_FETCH_ALLOW_HOSTS: value }).IMAGE_FETCH_ALLOW_HOSTS);

describe('allowListed (IMAGE_FETCH_ALLOW_HOSTS)', () => {
  const policy = fromEnv('127.0.0.1:5123, localhost:5123, [::1]:8080, images.internal:80');

  it('allows any address for exactly a listed host and port', () => {
    expect(policy('127.0.0.1', { host: '127.0.0.1', port: 5123 })).toBe(true);
    expect(policy('127.0.0.1', { host: 'localhost', port: 5123 })).toBe(true);
    expect(policy('::1', { host: 'localhost', port: 5123 })).toBe(true);
    expect(policy('::1', { host: '::1', port: 8080 })).toBe(true);
    expect(policy('10.1.2.3', { host: 'images.internal', port: 80 })).toBe(true);
  });

  it('refuses the same host on another port', () => {
    expect(policy('127.0.0.1', { host: '127.0.0.1', port: 5124 })).toBe(false);
    expect(policy('127.0.0.1', { host: 'localhost', port: 22 })).toBe(false);
    expect(policy('::1', { host: '::1', port: 5123 })).toBe(false);
    expect(policy('10.1.2.3', { host: 'images.internal', port: 443 })).toBe(false);
  });

  it('refuses another name that resolves to a listed address (DNS rebinding)', () => {
    expect(policy('127.0.0.1', { host: 'rebind.attacker.example', port: 5123 })).toBe(false);
    expect(policy('127.0.0.1', { host: '127.0.0.2', port: 5123 })).toBe(false);
    expect(policy('169.254.169.254', { host: 'metadata.example', port: 80 })).toBe(false);
  });

  it('keeps every public address reachable, on any port', () => {
    expect(policy('93.184.215.14', { host: 'example.com', port: 443 })).toBe(true);
    expect(policy('2606:4700::6810:84e5', { host: 'example.org', port: 8443 })).toBe(true);
  });

  it('is publicOnly itself when nothing is listed', () => {
    expect(fromEnv('')).toBe(publicOnly);
    expect(allowListed([])).toBe(publicOnly);
  });

  it('compares the normalised forms the URL parser gives the fetcher', () => {
    const p = fromEnv('LocalHost:5123,[::FFFF:7F00:1]:80,0x7f.1:81');
    const hostOf = (url: string) => new URL(url).hostname.replace(/^\[|\]$/g, '');
    expect(p('127.0.0.1', { host: hostOf('http://LOCALHOST:5123/'), port: 5123 })).toBe(true);
    expect(p('::ffff:7f00:1', { host: hostOf('http://[::ffff:127.0.0.1]/'), port: 80 })).toBe(true);
    expect(p('127.0.0.1', { host: hostOf('http://127.0.0.1:81/'), port: 81 })).toBe(true);
  });

  it('writes destinations as the setting does', () => {
    expect(destinationKey({ host: '::1', port: 8080 })).toBe('[::1]:8080');
    expect(destinationKey({ host: 'localhost', port: 5123 })).toBe('localhost:5123');
  });
});
