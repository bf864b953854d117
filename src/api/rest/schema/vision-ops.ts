import { z } from 'zod';
import { LIMITS } from '../../../domain/limits';
import { operation } from '../operation';
import * as body from './bodies';
import { datasetParams, decimal, fields, flag, integer, limit, q, text, v } from './params';
import * as shape from './shapes';

// The Vision API: reads of a dataset with its browse token (interface §2, §7; contract §6–§11).

const DS = '/orgs/:organisation/datasets/:dataset';
const vision = { tag: 'vision', access: 'dataset', params: datasetParams } as const;
const grouping = {
  group: text('One entry per value of this field (contract §13)'),
  group_size: integer('Items shown per group, 1–10 (default 1)'),
};
/** Contract §15 controls on every similarity request. */
const discovery = {
  diversity: decimal('0–1: trade similarity for variety among the results (default 0)'),
  candidates: integer(
    'With diversity: how many nearest items to choose from (limit–500, default 4 × limit)',
  ),
  min_score: decimal('0–1: leave out results scoring below (a page may be short)'),
  exhaustive: flag('Rank every item matching q exactly, and say how many (total_results)'),
};
const similarityQuery = { fields, q, limit, v, ...grouping, ...discovery };
const page = integer('Page of results, from 1; page × limit ≤ 1000');
const notReady = ['invalid_request', 'not_found', 'payment_required', 'dataset_not_ready'] as const;

export const details = operation({
  ...vision,
  id: 'contentDetails',
  method: 'GET',
  path: `${DS}/content/details`,
  summary: 'Check that items exist and read their metadata (not billed)',
  query: z.object({ ids: text('Comma-separated item ids'), fields }),
  status: 200,
  response: shape.results,
  errors: ['invalid_request', 'not_found'],
});

export const fieldCounts = operation({
  ...vision,
  id: 'contentFields',
  method: 'GET',
  path: `${DS}/content/fields`,
  summary: 'Field names (fields=*), or value counts of named fields under q (not billed)',
  query: z.object({ fields, q }),
  status: 200,
  response: shape.ok.extend({
    fields: z.union([
      z.array(z.string()),
      z.record(z.string(), z.record(z.string(), z.number().int().min(0))),
    ]),
  }),
  errors: ['invalid_request', 'not_found'],
});

export const similar = operation({
  ...vision,
  id: 'similar',
  method: 'GET',
  path: `${DS}/similar`,
  summary: 'Items visually similar to an item; the item itself first',
  query: z.object({
    ...similarityQuery,
    page,
    id: text('The item to start from'),
    exclude_parent: flag('Leave out items sharing the item’s `parent` metadata value'),
  }),
  status: 200,
  response: shape.ranked,
  errors: [...notReady],
});

export const explore = operation({
  ...vision,
  id: 'explore',
  method: 'GET',
  path: `${DS}/explore`,
  summary: 'A visual-discovery journey: random items, or the next step after a selection',
  query: z.object({
    ...similarityQuery,
    id: text('The selected item; absent for a random start'),
    path: text('The journey’s earlier selections, as explore_url carries them'),
  }),
  status: 200,
  response: shape.ranked,
  errors: [...notReady],
});

export const lens = operation({
  ...vision,
  id: 'lens',
  method: 'POST',
  path: `${DS}/search`,
  summary: 'Items similar to an uploaded image ("lens")',
  query: z.object({ ...similarityQuery, page }),
  body: body.lens,
  bodyLimit: LIMITS.lensBodyBytes,
  status: 200,
  response: shape.ranked,
  errors: [...notReady, 'payload_too_large'],
});

export const track = operation({
  ...vision,
  id: 'track',
  method: 'POST',
  path: `${DS}/track`,
  summary: 'Record events (clicks, purchases, …) for analytics',
  query: z.object({ v }),
  body: body.track,
  bodyOptional: true,
  status: 202,
  response: shape.accepted,
  errors: ['invalid_request', 'not_found'],
});

export const collection = operation({
  ...vision,
  id: 'collection',
  method: 'GET',
  path: `${DS}/collection`,
  summary: 'Items similar to a curated group of items, the group excluded',
  query: z.object({
    ...similarityQuery,
    page,
    ids: text('Comma-separated item ids (1–50)'),
    negative_ids: text('Comma-separated item ids to steer away from (0–50)'),
    strategy: text('centroid (default) or best_score'),
  }),
  status: 200,
  response: shape.ranked,
  errors: [...notReady],
});

export const search = operation({
  ...vision,
  id: 'search',
  method: 'GET',
  path: `${DS}/search`,
  summary: 'Paginated, sorted, filtered listing with facets, stats and histograms',
  query: z.object({
    fields,
    q,
    limit,
    v,
    ...grouping,
    page: integer('Page number, from 1'),
    sort: text('Sort field (string or number field, or a service time field)'),
    order: text('asc or desc'),
    facets: text('Comma-separated fields to count values of (contract §10)'),
    facet_size: text('Values per facet, 1–1000 (default 10)'),
    disjunctive: text('Facet fields whose counts ignore their own q conditions'),
    stats: text('Comma-separated numeric fields to summarise'),
    histogram: text('field:interval pairs, e.g. price:50,service_created_at:day'),
    facet_scope: text('With group: facets count `groups` (default) or `items`'),
  }),
  status: 200,
  response: shape.searchPage,
  errors: [...notReady],
});
