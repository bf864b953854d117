import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { KeyStore } from '../../ports/key-store';

/**
 * The server key of an embedded installation: a file beside the data, outside the database, so
 * a copied database alone does not reveal browse tokens. Two processes starting on one data
 * directory end up with the same key.
 */
export class FileKeyStore implements KeyStore {
  private key?: Buffer;

  constructor(private readonly dataDir: string) {}

  serverKey(): Promise<Buffer> {
    if (this.key) return Promise.resolve(this.key);
    const file = path.join(this.dataDir, 'server.key');
    if (!fs.existsSync(file)) {
      fs.mkdirSync(this.dataDir, { recursive: true });
      // Written whole under another name, then linked into place: link fails if the file
      // exists, and a reader never sees a half-written key.
      const tmp = `${file}.${process.pid}.${crypto.randomBytes(4).toString('hex')}`;
      fs.writeFileSync(tmp, crypto.randomBytes(32).toString('hex'), { mode: 0o600, flag: 'wx' });
      try {
        fs.linkSync(tmp, file);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      } finally {
        fs.unlinkSync(tmp);
      }
    }
    this.key = Buffer.from(fs.readFileSync(file, 'utf8').trim(), 'hex');
    return Promise.resolve(this.key);
  }
}
