/**
 * The console's client of the public API (contract.md): REST for everything, GraphQL only for
 * `viewer`, the one public way to learn which organisation (and dataset) a token belongs to, the
 * sidebar's figures, and the near-duplicate report (its page of groups and the browse token in one
 * request, then the image URLs of all of the page's items in another). The GraphQL operations are
 * in ./graphql/*.graphql; codegen.yml types them into ./graphql/generated.ts (`npm run codegen`).
 */

import type { z } from 'zod';
import type * as shape from '../../api/rest/schema/shapes';
import type { ScopedPayload } from './lib/scoped';
import {
  ConsoleDismissDuplicatesDocument,
  ConsoleDuplicatesDocument,
  ConsoleFiguresDocument,
  ConsoleImageUrlsDocument,
  ConsoleViewerDocument,
  type ConsoleDuplicatesQuery,
  type DuplicateKind,
  type TypedDocumentString,
} from './graphql/generated';

// The REST bodies as the service's own schemas describe them (src/api/rest/schema/shapes.ts,
// the source of /openapi.json): type-only imports, so nothing of zod reaches the bundle.
type Body<T extends z.ZodType> = z.output<T>;

export type ErrorDetail = NonNullable<Body<typeof shape.errorBody>['error']['details']>[number];

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: ErrorDetail[] = [],
    readonly requestId?: string,
    /** Seconds to wait before asking again (429 and 503: the `Retry-After` header). */
    readonly retryAfter?: number,
  ) {
    super(message);
  }
}

/** A `Retry-After` in seconds (a number, or an HTTP date), if there is one. */
function retryAfterOf(header: string | null): number | undefined {
  if (!header) return undefined;
  const n = Number(header);
  if (Number.isFinite(n) && n >= 0) return Math.ceil(n);
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

export type ResultEntry = Body<typeof shape.resultEntry>;
export type Metadata = ResultEntry['metadata'];
export type SearchPage = Body<typeof shape.searchPage>;
export type FacetFigure = NonNullable<SearchPage['facets']>[string];
export type StatsFigure = NonNullable<SearchPage['stats']>[string];
export type HistogramBucket = NonNullable<SearchPage['histograms']>[string][number];
/** A bucket of a numeric field (the service time fields' have ISO 8601 bounds instead). */
export interface NumericBucket {
  from: number;
  to: number;
  count: number;
}
/** The numeric buckets of a histogram (the console asks for numeric fields only). */
export const numericBuckets = (buckets: HistogramBucket[] = []): NumericBucket[] =>
  buckets.filter((b): b is NumericBucket => typeof b.from === 'number' && typeof b.to === 'number');
export type Dataset = Body<typeof shape.dataset>;
export type ProcessingError = Body<typeof shape.processingError>;
export type Usage = Body<typeof shape.usage>;
export type AnalyticsReport = Body<typeof shape.report>;
/** A page of the near-duplicate report (contract §18). */
export type DuplicateReport = ConsoleDuplicatesQuery['organisation']['dataset']['duplicates'];
export type DuplicateGroup = DuplicateReport['groups'][number];

/** Ids per `details` request (contract: at most 1000). */
const DETAILS_IDS = 500;

/** What the service puts in a GraphQL error's `extensions` (the REST error's fields). */
interface GraphqlExtensions {
  code?: string;
  status?: number;
  details?: ErrorDetail[];
  request_id?: string;
  retryAfter?: number;
}

const V2 = 'application/vnd.service.v2+json';
const enc = encodeURIComponent;

type Query = Record<string, string | number | undefined>;

function queryString(q: Query = {}): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) if (v !== undefined && v !== '') p.set(k, String(v));
  const s = p.toString().replace(/\+/g, '%20');
  return s ? `?${s}` : '';
}

/** One token, one client. Every call goes to the origin that served the page. */
export class Api {
  constructor(readonly token: string) {}

  async request<T>(method: string, path: string, body?: unknown, accept = V2): Promise<T> {
    const headers: Record<string, string> = { authorization: `token ${this.token}`, accept };
    if (body !== undefined) headers['content-type'] = 'application/json';
    let res: Response;
    try {
      res = await fetch(path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        credentials: 'omit',
        cache: 'no-store',
      });
    } catch {
      throw new ApiError(0, 'network', 'the service cannot be reached');
    }
    const text = await res.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : {};
    } catch {
      json = undefined;
    }
    if (!res.ok) {
      const body = json as
        | {
            error?: Partial<ApiError> & { request_id?: string };
            // GraphQL answers a refused token with its errors (the same code in `extensions`).
            errors?: { message?: string; extensions?: GraphqlExtensions }[];
          }
        | undefined;
      const g = body?.errors?.[0];
      const e = body?.error ?? (g ? { message: g.message, ...g.extensions } : undefined);
      throw new ApiError(
        res.status,
        e?.code ?? 'http_error',
        e?.message ?? `HTTP ${res.status}`,
        e?.details ?? [],
        e?.request_id ?? res.headers.get('x-request-id') ?? undefined,
        retryAfterOf(res.headers.get('retry-after')) ?? g?.extensions?.retryAfter,
      );
    }
    return json as T;
  }

  /**
   * A GraphQL operation generated from ./graphql/*.graphql, sent as its source text; its first
   * error becomes an ApiError with the code and status the REST API would give (the service puts
   * them in `extensions`).
   */
  async graphql<T, V>(document: TypedDocumentString<T, V>, variables: V): Promise<T> {
    const r = await this.request<{
      data?: T | null;
      errors?: { message: string; extensions?: GraphqlExtensions }[];
    }>(
      'POST',
      '/graphql',
      { query: document.toString(), variables },
      // GraphQL answers application/json, not the REST vendor type.
      'application/json',
    );
    const err = r.errors?.[0];
    if (err || !r.data) {
      const x = err?.extensions ?? {};
      throw new ApiError(
        x.status ?? 400,
        x.code ?? 'graphql',
        err?.message ?? 'no data',
        x.details ?? [],
        x.request_id,
        x.retryAfter,
      );
    }
    return r.data;
  }

  /** What the token is (GraphQL `viewer`: REST has no "who am I" endpoint). */
  viewer = () => this.graphql(ConsoleViewerDocument, {}).then((d) => d.viewer);
}

/** The admin API of one organisation (organisation token). */
export class OrgApi {
  constructor(
    readonly api: Api,
    readonly org: string,
  ) {}

  private ds = (name: string) => `/orgs/${enc(this.org)}/datasets/${enc(name)}`;

  listDatasets = () =>
    this.api
      .request<{ datasets: Dataset[] }>('GET', `/orgs/${enc(this.org)}/datasets`)
      .then((r) => r.datasets);
  createDataset = (name: string) =>
    this.api
      .request<{ dataset: Dataset }>('POST', `/orgs/${enc(this.org)}/datasets`, { name })
      .then((r) => r.dataset);
  rotateBrowseToken = (name: string) =>
    this.api
      .request<{ dataset: Dataset }>('POST', `${this.ds(name)}/browse_token`)
      .then((r) => r.dataset);
  getDataset = (name: string) =>
    this.api.request<{ dataset: Dataset }>('GET', this.ds(name)).then((r) => r.dataset);
  /** Tuned similarity (contract §20): learn from a field of labels, or null to switch off. */
  setSimilarity = (name: string, learnFrom: string | null, weight: number) =>
    this.api
      .request<{ dataset: Dataset }>('PUT', `${this.ds(name)}/settings/similarity`, {
        learn_from: learnFrom,
        weight,
      })
      .then((r) => r.dataset);
  setFields = (name: string, fields: Record<string, string[]>) =>
    this.api
      .request<{ dataset: Dataset }>('PUT', `${this.ds(name)}/settings/fields`, { fields })
      .then((r) => r.dataset);
  errors = (name: string, limit = 50, offset = 0) =>
    this.api.request<{ errors: ProcessingError[]; total_results: number }>(
      'GET',
      `${this.ds(name)}/errors${queryString({ limit, offset })}`,
    );
  /**
   * A scoped token for one dataset (contract §16): the service signs the scope with the
   * dataset's key, which the console never holds.
   */
  mintScopedToken = (name: string, scope: ScopedPayload) =>
    this.api
      .request<{ token: string }>('POST', `${this.ds(name)}/scoped-tokens`, scope)
      .then((r) => r.token);
  usage = () =>
    this.api.request<{ usage: Usage }>('GET', `/orgs/${enc(this.org)}/usage`).then((r) => r.usage);
  analytics = (name: string, from: Date, interval: 'hour' | 'day') =>
    this.api
      .request<{
        analytics: AnalyticsReport;
      }>('GET', `${this.ds(name)}/analytics${queryString({ from: from.toISOString(), interval })}`)
      .then((r) => r.analytics);
  /**
   * A page of the dataset's near-duplicate report (contract §18): `kind` unset gives both kinds.
   * The dataset's browse token comes with it, for the items' images (VisionApi.imageUrls).
   */
  duplicates = (
    name: string,
    p: { kind?: DuplicateKind; excludeSameParent: boolean; limit: number; cursor?: string },
  ) =>
    this.api
      .graphql(ConsoleDuplicatesDocument, {
        o: this.org,
        d: name,
        kind: p.kind ?? null,
        excludeSameParent: p.excludeSameParent,
        limit: p.limit,
        cursor: p.cursor ?? null,
      })
      .then(({ organisation: { dataset } }) => ({
        report: dataset.duplicates,
        browseToken: dataset.browseToken,
      }));
  /** Records that these items are not duplicates of each other; later reports keep them apart. */
  dismissDuplicates = (name: string, ids: string[]) =>
    this.api
      .graphql(ConsoleDismissDuplicatesDocument, { o: this.org, d: name, ids })
      .then(() => undefined);
}

export interface SearchParams {
  page?: number;
  limit?: number;
  sort?: string;
  order?: 'asc' | 'desc';
  q?: string;
  fields?: string;
  facets?: string;
  disjunctive?: string;
  facet_size?: number;
  stats?: string;
  histogram?: string;
  /** One result per value of this field (contract §13); pages and facets then count groups. */
  group?: string;
}

/** The parameters of a similarity request (similar, lens) the console sends. */
type SimilarParams = {
  limit?: number;
  fields?: string;
  q?: string;
  group?: string;
  /**
   * 0–1: each result is chosen for its similarity to the query less its similarity to the
   * results chosen before it (maximal marginal relevance, contract §15); absent: 0.
   */
  diversity?: number;
};

/** The Vision API of one dataset (its browse token). */
export class VisionApi {
  readonly base: string;
  constructor(
    readonly api: Api,
    readonly org: string,
    readonly dataset: string,
  ) {
    this.base = `/orgs/${enc(org)}/datasets/${enc(dataset)}`;
  }

  /**
   * Facets and stats of `fields` over the whole dataset (`limit: 0`, one billable search), for
   * the sidebar to learn which fields hold numbers and which hold values worth listing; with no
   * field, whether the dataset answers at all. Asked through GraphQL, whose `dataset_not_ready`
   * (fewer than 200 processed items) comes in a 200 response: polling a pending dataset does not
   * fill the browser console with failed requests.
   */
  figures = async (
    fields: string[],
  ): Promise<{ facets: Record<string, FacetFigure>; stats: Record<string, StatsFigure> }> => {
    const d = await this.api.graphql(ConsoleFiguresDocument, {
      o: this.org,
      d: this.dataset,
      limit: fields.length ? 0 : 2,
      facets: fields.length ? fields.map((field) => ({ field })) : null,
      stats: fields.length ? fields : null,
    });
    const { facets, stats } = d.vision.search;
    // The GraphQL figures have the REST shapes (FacetFigure, StatsFigure) once keyed by field.
    return {
      facets: Object.fromEntries((facets ?? []).map(({ field, ...f }) => [field, f])),
      stats: Object.fromEntries((stats ?? []).map(({ field, ...f }) => [field, f])),
    };
  };
  /**
   * The URL each processed item among `ids` was processed from (GraphQL `details`, not billed):
   * the service keeps no image, so this is what the console shows. An unknown id is absent.
   */
  imageUrls = async (ids: string[]): Promise<Map<string, string>> => {
    const urls = new Map<string, string>();
    for (let i = 0; i < ids.length; i += DETAILS_IDS) {
      const d = await this.api.graphql(ConsoleImageUrlsDocument, {
        o: this.org,
        d: this.dataset,
        ids: ids.slice(i, i + DETAILS_IDS),
      });
      for (const item of d.vision.details) if (item.image) urls.set(item.id, item.image.url);
    }
    return urls;
  };
  fieldNames = () =>
    this.api
      .request<{ fields: string[] }>('GET', `${this.base}/content/fields?fields=*`)
      .then((r) => r.fields);
  search = (p: SearchParams) =>
    this.api.request<SearchPage>('GET', `${this.base}/search${queryString({ ...p })}`);
  similar = (id: string, p: SimilarParams = {}) =>
    this.api.request<SearchPage>('GET', `${this.base}/similar${queryString({ id, ...p })}`);
  lens = (image: string, p: SimilarParams = {}) =>
    this.api.request<SearchPage>('POST', `${this.base}/search${queryString(p)}`, { image });
  /**
   * Follows a result's `explore_url` (it carries the journey so far in `path`). Only its path
   * and query are used: the page talks to its own origin whatever PUBLIC_BASE_URL says.
   */
  explore = (exploreUrl: string, set: { limit?: number; fields?: string; group?: string } = {}) => {
    const u = new URL(exploreUrl, location.origin);
    if (u.pathname !== `${this.base}/explore`)
      return Promise.reject(new ApiError(0, 'client', 'not an explore link of this dataset'));
    for (const [k, v] of Object.entries(set)) if (v !== undefined) u.searchParams.set(k, String(v));
    // URLSearchParams writes a space as '+'; %20 reads the same to every server.
    return this.api.request<SearchPage>('GET', u.pathname + u.search.replace(/\+/g, '%20'));
  };
}
