import crypto from 'node:crypto';
import { AppError } from '../domain/errors';
import type { Dataset } from '../domain/dataset';
import type { AccountStore } from '../ports/account-store';
import type { Principal } from './principal';
import { hashToken, issueToken, parseToken, tokenEquals } from './tokens';
import { parseScoped, scopedKey, verifyScoped } from './scoped-tokens';

const OPERATOR_PREFIX_KEY = 'operator_token_prefix';

/** Datasets this process last read for the Vision API, each request's first guess. */
const SEEN_DATASETS = 10_000;

/** The dataset changed between the copy a request started with and its realtime read. */
class DatasetChanged extends Error {
  constructor(readonly current: Dataset) {
    super('the dataset changed while the request ran');
  }
}

/** Whether two reads of a dataset answer a Vision API request alike. */
const sameForQueries = (a: Dataset, b: Dataset): boolean =>
  a.id === b.id &&
  a.org === b.org &&
  a.name === b.name &&
  a.settings.version === b.settings.version &&
  a.browseRotation === b.browseRotation &&
  a.embedder?.id === b.embedder?.id &&
  sameTuning(a, b);

/** Whether two reads rank similarity alike (contract §20): the same projection and weight. */
const sameTuning = (a: Dataset, b: Dataset): boolean => {
  const on = (d: Dataset) => (d.similarity?.state === 'active' ? d.similarity : undefined);
  return on(a)?.model === on(b)?.model && on(a)?.weight === on(b)?.weight;
};

/**
 * Hands engine work back once the dataset's realtime read has confirmed the copy it was built
 * from (throws DatasetChanged otherwise, which makes the request start again).
 */
export type Confirm = <R>(work: Promise<R>) => Promise<R>;

const unauthorized = (m: string): AppError => new AppError('unauthorized', m);
const UNKNOWN_TOKEN = 'unknown or revoked token';
const notFound = (what: string): AppError => new AppError('not_found', `${what} not found`);

/**
 * Establishes the caller and decides access. Anything a token may not see is "not found", so
 * a token cannot probe other tenants (contract §2); the right tenant with the wrong kind of
 * token is "forbidden".
 */
export class AuthService {
  private readonly seen = new Map<string, Dataset>();
  /** The same for scoped tokens, which name no dataset: by organisation and name. */
  private readonly seenByName = new Map<string, Dataset>();
  /** Scoped keys by dataset id and rotation: two HMACs per request become one. */
  private readonly keys = new Map<string, string>();

  constructor(
    private readonly accounts: AccountStore,
    private readonly operatorTokenFromEnv?: string,
    /** Signs scoped tokens (contract §16); without it none is accepted. */
    private readonly serverKey?: Buffer,
    private readonly now: () => number = Date.now,
  ) {}

  /** For a scoped token, the id of the dataset this process last saw under `org`/`name`. */
  datasetHint(p: Principal, org: string, name: string): string | undefined {
    return p.kind === 'scoped' ? this.seenByName.get(`${org}\0${name}`)?.id : undefined;
  }

  /** The dataset's scoped-token key (contract §16): derived, never stored. */
  scopedKey(ds: Dataset): string {
    if (!this.serverKey) throw new AppError('unavailable', 'scoped tokens need the server key');
    const at = `${ds.id}:${ds.browseRotation}`;
    let key = this.keys.get(at);
    if (!key) {
      if (this.keys.size >= SEEN_DATASETS) this.keys.clear();
      key = scopedKey(this.serverKey, ds.id, ds.browseRotation);
      this.keys.set(at, key);
    }
    return key;
  }

  /** Whether checkScoped accepts; a refusal on a cached copy is decided on the realtime read. */
  private passes(p: Principal, ds: Dataset): boolean {
    try {
      this.checkScoped(p, ds);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * A scoped token's signature under `ds`'s key, then its expiry: every Vision request of a
   * scoped token passes here with the dataset it runs on, so a token of another dataset, one
   * signed before a rotation, or a tampered one never reaches the work.
   */
  private checkScoped(p: Principal, ds: Dataset): void {
    if (p.kind !== 'scoped') return;
    if (!this.serverKey || !verifyScoped(p.token, this.scopedKey(ds)))
      throw unauthorized(UNKNOWN_TOKEN);
    const exp = p.token.claims.exp;
    if (exp !== undefined && exp * 1000 <= this.now())
      throw new AppError(
        'token_expired',
        `the scoped token expired at ${new Date(exp * 1000).toISOString()}`,
      );
  }

  async authenticate(header: string | undefined): Promise<Principal> {
    if (!header)
      throw unauthorized('missing Authorization header (expected "Authorization: token <TOKEN>")');
    const m = /^token\s+(\S+)\s*$/i.exec(header);
    if (!m)
      throw unauthorized(
        'malformed Authorization header (expected "Authorization: token <TOKEN>")',
      );
    const token = m[1]!;
    if (token.startsWith('st_')) {
      const scoped = parseScoped(token);
      if (!scoped) throw unauthorized(UNKNOWN_TOKEN);
      return { kind: 'scoped', token: scoped };
    }
    if (this.operatorTokenFromEnv && this.sameSecret(token, this.operatorTokenFromEnv))
      return { kind: 'operator' };
    const parsed = parseToken(token);
    const rec = parsed && (await this.accounts.findToken(parsed.prefix));
    if (!rec || !tokenEquals(token, rec.hash)) throw unauthorized(UNKNOWN_TOKEN);
    if (rec.kind === 'op') return { kind: 'operator' };
    if (rec.kind === 'org' && rec.org) return { kind: 'org', org: rec.org, prefix: rec.prefix };
    if (rec.kind === 'ds' && rec.org && rec.datasetId)
      return { kind: 'dataset', org: rec.org, datasetId: rec.datasetId };
    throw unauthorized(UNKNOWN_TOKEN);
  }

  private sameSecret(a: string, b: string): boolean {
    return crypto.timingSafeEqual(
      Buffer.from(hashToken(a), 'hex'),
      Buffer.from(hashToken(b), 'hex'),
    );
  }

  /**
   * Makes the installation's operator token when none is configured and none was made yet, and
   * returns it (shown once; stored as a hash only). Of several processes starting at once, the
   * first to claim it wins; the others take theirs back and return nothing.
   */
  async ensureOperatorToken(now: Date): Promise<string | undefined> {
    if (this.operatorTokenFromEnv || (await this.accounts.getMeta(OPERATOR_PREFIX_KEY)))
      return undefined;
    const { token, record } = issueToken('op', {}, now);
    await this.accounts.putToken(record);
    if ((await this.accounts.claimMeta(OPERATOR_PREFIX_KEY, record.prefix)) === record.prefix)
      return token;
    await this.accounts.removeToken(record.prefix);
    return undefined;
  }

  /** What a token is: its kind and, for org and dataset tokens, whose it is. */
  async describe(
    p: Principal,
  ): Promise<{ kind: Principal['kind']; organisation?: string; dataset?: string }> {
    if (p.kind === 'operator') return { kind: 'operator' };
    if (p.kind === 'org') return { kind: 'org', organisation: p.org };
    // names no dataset: what it may see is known only with a request naming one
    if (p.kind === 'scoped') return { kind: 'scoped' };
    const ds = await this.accounts.getDatasetById(p.datasetId);
    return { kind: 'dataset', organisation: p.org, dataset: ds?.name };
  }

  requireOperator(p: Principal): void {
    if (p.kind !== 'operator')
      throw new AppError('forbidden', 'this endpoint needs the operator token');
  }

  /** Admin API on an organisation: its org tokens only. */
  async requireOrgAdmin(
    p: Principal,
    org: string,
    opts: { allowOperator?: boolean } = {},
  ): Promise<void> {
    if (p.kind === 'org' && p.org === org) return;
    if (p.kind === 'scoped')
      throw new AppError(
        'forbidden',
        'a scoped token cannot use the admin API; it serves the Vision API of its dataset',
      );
    if (p.kind === 'operator') {
      if (!(await this.accounts.getOrg(org))) throw notFound(`organisation '${org}'`);
      if (opts.allowOperator) return;
      throw new AppError(
        'forbidden',
        'the operator token cannot use the admin API; use an organisation token',
      );
    }
    if (p.kind === 'dataset' && p.org === org)
      throw new AppError(
        'forbidden',
        'a dataset token cannot use the admin API; use an organisation token',
      );
    throw notFound(`organisation '${org}'`);
  }

  /** Admin API on a dataset. */
  async adminDataset(p: Principal, org: string, name: string): Promise<Dataset> {
    await this.requireOrgAdmin(p, org);
    const ds = await this.accounts.getDataset(org, name);
    if (!ds) throw notFound(`dataset '${name}'`);
    return ds;
  }

  /**
   * Runs a Vision API request on its dataset without waiting for the dataset's realtime read:
   * the work starts on the copy this process last read, the read runs alongside, and `confirm`
   * holds the engine's answer until the read agrees (same settings version, embedder, name).
   * If it does not — a settings change made on another host a moment ago — or if the work was
   * refused on the copy (a q naming a field only the new settings enable), the request starts
   * again on the current dataset, so every answer is the one the realtime read would give.
   * The read would otherwise be a round trip before every request's own search.
   */
  async withVisionDataset<T>(
    p: Principal,
    org: string,
    name: string,
    work: (ds: Dataset, confirm: Confirm) => Promise<T>,
  ): Promise<T> {
    const read = this.visionDataset(p, org, name);
    let guess =
      p.kind === 'dataset'
        ? this.seen.get(p.datasetId)
        : p.kind === 'scoped'
          ? this.seenByName.get(`${org}\0${name}`)
          : undefined;
    if (guess && p.kind === 'scoped' && !this.passes(p, guess)) guess = undefined;
    if (!guess || guess.org !== org || guess.name !== name) {
      const ds = await read;
      this.checkScoped(p, ds);
      return work(ds, (w) => w);
    }
    const confirmed = read.then((current) => {
      if (!sameForQueries(current, guess)) throw new DatasetChanged(current);
    });
    confirmed.catch(() => undefined); // observed here; awaited below or by confirm
    const confirm: Confirm = async (w) => (await Promise.all([w, confirmed]))[0];
    try {
      const out = await work(guess, confirm);
      await confirmed;
      return out;
    } catch (e) {
      // a refusal made on the copy stands only if the copy was current
      const changed = await confirmed.then(
        () => undefined,
        (c: unknown) => c,
      );
      if (changed instanceof DatasetChanged) {
        this.checkScoped(p, changed.current);
        return work(changed.current, (w) => w);
      }
      throw changed ?? e;
    }
  }

  /**
   * Vision API on a dataset: that dataset's own token, or a scoped token checked against it by
   * withVisionDataset. Realtime.
   */
  private async visionDataset(p: Principal, org: string, name: string): Promise<Dataset> {
    if (p.kind === 'scoped') {
      // 401 whatever is missing: a scoped token must not tell which organisations exist
      const at = `${org}\0${name}`;
      // By the id last seen under this name: one realtime read where the name costs two. A
      // live dataset holding the name is the one the name means (names are unique among them).
      const known = this.seenByName.get(at);
      let ds = known && (await this.accounts.getDatasetById(known.id));
      if (!ds || ds.org !== org || ds.name !== name) ds = await this.accounts.getDataset(org, name);
      if (!ds) {
        this.seenByName.delete(at);
        throw unauthorized(UNKNOWN_TOKEN);
      }
      if (this.seenByName.size >= SEEN_DATASETS) this.seenByName.clear();
      this.seenByName.set(at, ds);
      return ds;
    }
    if (p.kind === 'dataset') {
      // The token names its dataset: one read by id (not name, then id) on every request.
      const ds = p.org === org ? await this.accounts.getDatasetById(p.datasetId) : undefined;
      if (!ds || ds.org !== org || ds.name !== name) {
        this.seen.delete(p.datasetId);
        throw notFound(`dataset '${name}'`);
      }
      if (this.seen.size >= SEEN_DATASETS) this.seen.clear();
      this.seen.set(ds.id, ds);
      return ds;
    }
    if ((p.kind === 'org' && p.org === org) || p.kind === 'operator') {
      const ds = await this.accounts.getDataset(org, name);
      if (!ds) throw notFound(`dataset '${name}'`);
      throw new AppError(
        'forbidden',
        "the Vision API needs the dataset's token (its browse_token), not an organisation token",
      );
    }
    throw notFound(`organisation '${org}'`);
  }
}
