import crypto from 'node:crypto';
import type { KeyStore } from '../../ports/key-store';
import { createOnly, getVersioned } from './cas';
import { guard } from './guard';
import type { EsIndices } from './indices';

const SERVER_KEY = 'server_key';

/**
 * The server key in the installation's meta index: the first process to ask creates it
 * (create-only), every other reads that one. It never changes, so a process keeps it once read.
 */
export class EsKeyStore implements KeyStore {
  private key?: Promise<Buffer>;

  constructor(private readonly indices: EsIndices) {}

  serverKey(): Promise<Buffer> {
    this.key ??= guard(async () => {
      const index = this.indices.shared('meta');
      const mine = crypto.randomBytes(32).toString('hex');
      if (await createOnly(this.indices.client, index, SERVER_KEY, { value: mine }))
        return Buffer.from(mine, 'hex');
      const stored = await getVersioned<{ value: string }>(this.indices.client, index, SERVER_KEY);
      return Buffer.from(stored!.doc.value, 'hex');
    }).catch((e: unknown) => {
      this.key = undefined;
      throw e;
    });
    return this.key;
  }
}
