import crypto from 'node:crypto';
import type { KeyStore } from '../../ports/key-store';
import { claimValue } from './cas';
import type { EsIndices } from './indices';

/**
 * The server key in the installation's meta index: the first process to ask creates it
 * (create-only), every other reads that one. It never changes, so a process keeps it once read.
 */
export class EsKeyStore implements KeyStore {
  private key?: Promise<Buffer>;

  constructor(private readonly indices: EsIndices) {}

  serverKey(): Promise<Buffer> {
    this.key ??= this.claim().catch((e: unknown) => {
      this.key = undefined;
      throw e;
    });
    return this.key;
  }

  private async claim(): Promise<Buffer> {
    const mine = crypto.randomBytes(32).toString('hex');
    const stored = await claimValue(
      this.indices.client,
      this.indices.shared('meta'),
      'server_key',
      mine,
    );
    return Buffer.from(stored, 'hex');
  }
}
