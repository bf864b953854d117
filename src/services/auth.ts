import crypto from 'node:crypto';
import { AppError } from '../domain/errors';
import type { Dataset } from '../domain/dataset';
import type { AccountStore } from '../ports/account-store';
import type { Principal } from './principal';
import { hashToken, issueToken, parseToken, tokenEquals } from './tokens';

const OPERATOR_PREFIX_KEY = 'operator_token_prefix';

const unauthorized = (m: string): AppError => new AppError('unauthorized', m);
const notFound = (what: string): AppError => new AppError('not_found', `${what} not found`);

/**
 * Establishes the caller and decides access. Anything a token may not see is "not found", so
 * a token cannot probe other tenants (contract §2); the right tenant with the wrong kind of
 * token is "forbidden".
 */
export class AuthService {
  constructor(
    private readonly accounts: AccountStore,
    private readonly operatorTokenFromEnv?: string,
  ) {}

  async authenticate(header: string | undefined): Promise<Principal> {
    if (!header)
      throw unauthorized('missing Authorization header (expected "Authorization: token <TOKEN>")');
    const m = /^token\s+(\S+)\s*$/i.exec(header);
    if (!m)
      throw unauthorized(
        'malformed Authorization header (expected "Authorization: token <TOKEN>")',
      );
    const token = m[1];
    if (this.operatorTokenFromEnv && this.sameSecret(token, this.operatorTokenFromEnv))
      return { kind: 'operator' };
    const parsed = parseToken(token);
    const rec = parsed && (await this.accounts.findToken(parsed.prefix));
    if (!rec || !tokenEquals(token, rec.hash)) throw unauthorized('unknown or revoked token');
    if (rec.kind === 'op') return { kind: 'operator' };
    if (rec.kind === 'org' && rec.org) return { kind: 'org', org: rec.org, prefix: rec.prefix };
    if (rec.kind === 'ds' && rec.org && rec.datasetId)
      return { kind: 'dataset', org: rec.org, datasetId: rec.datasetId };
    throw unauthorized('unknown or revoked token');
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

  /** Vision API on a dataset: that dataset's own token only. */
  async visionDataset(p: Principal, org: string, name: string): Promise<Dataset> {
    if (p.kind === 'dataset') {
      // The token names its dataset: one read by id (not name, then id) on every request.
      const ds = p.org === org ? await this.accounts.getDatasetById(p.datasetId) : undefined;
      if (!ds || ds.org !== org || ds.name !== name) throw notFound(`dataset '${name}'`);
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
