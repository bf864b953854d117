import { z } from 'zod';
import { STATUS_BY_CODE, type ErrorCode } from '../../../domain/errors';
import { REQUEST_TYPES } from '../../../domain/plan';

// The bodies REST answers with (interface.md and contract), as /openapi.json documents them.
// A test validates real responses of every operation against these.

const count = z.number().int().min(0);
const isoTime = z.string().meta({ format: 'date-time' });

export const ok = z.object({ status: z.literal('ok') });
export const accepted = z.object({ status: z.literal('accepted') });

const errorDetail = z
  .object({
    index: z.number().int().optional(),
    id: z.string().optional(),
    field: z.string().optional(),
    param: z.string().optional(),
    position: z.number().int().optional(),
    value: z.string().optional(),
    message: z.string(),
  })
  .meta({ description: 'One problem: which item and field, or which parameter and position' });

export const errorBody = z
  .object({
    status: z.literal('error'),
    error: z.object({
      code: z.enum(Object.keys(STATUS_BY_CODE) as [ErrorCode, ...ErrorCode[]]),
      message: z.string(),
      details: z.array(errorDetail).optional(),
      request_id: z.string(),
    }),
  })
  .meta({ id: 'Error', description: 'Every error response (contract §2)' });

const metadataValue = z.union([
  z.string(),
  z.number(),
  z.boolean(),
  z.array(z.string()),
  z.array(z.number()),
]);

const entry = z.object({
  id: z.string(),
  explore_url: z.string().meta({ format: 'uri' }),
  metadata: z.record(z.string(), metadataValue),
  score: z.number().optional().meta({ description: 'Similarity, for visual results only' }),
});

export const resultEntry = entry
  .extend({
    group: z
      .object({
        value: z.union([z.string(), z.number(), z.boolean()]).nullable(),
        count: z.number().int().min(0),
        items: z
          .array(entry)
          .optional()
          .meta({ description: 'Further items of the group (group_size > 1)' }),
      })
      .optional()
      .meta({ description: 'With group=<field> (contract §13): the entry’s group' }),
  })
  .meta({ id: 'ResultEntry' });

const allowance = z.object({
  limitType: z.enum(['fixed', 'unlimited']),
  limit: count.optional(),
});

export const plan = z
  .object({
    credits: allowance,
    images: allowance,
    requestCredits: z.record(z.enum(REQUEST_TYPES), z.number().min(0)),
  })
  .meta({ id: 'Plan' });

/** Tuned similarity (contract §20). */
const similaritySetting = z
  .object({
    learn_from: z.string().nullable(),
    weight: z.number().min(0).max(1),
    state: z.enum(['fitting', 'active', 'inactive', 'off']),
    reason: z.string().nullable(),
    fitted_at: isoTime.nullable(),
    labelled_items: count,
    classes: count,
    cv_precision_at_10: z.object({ plain: z.number(), tuned: z.number() }).nullable(),
  })
  .meta({ id: 'SimilaritySetting' });

export const dataset = z
  .object({
    name: z.string(),
    browse_token: z.string(),
    content_url: z.string().meta({ format: 'uri' }),
    processing_errors_url: z.string().meta({ format: 'uri' }),
    settings: z.object({
      fields: z.record(z.string(), z.array(z.string())),
      version: z.number().int(),
      similarity: similaritySetting.optional(),
    }),
    status: z.enum(['pending', 'published']),
    created_at: isoTime,
    counts: z.object({ items: count, processed: count, pending: count, errors: count }),
  })
  .meta({ id: 'Dataset' });

export const organisation = z
  .object({ name: z.string(), plan, created_at: isoTime })
  .meta({ id: 'Organisation' });

export const token = z.object({ prefix: z.string(), created_at: isoTime });

const datasetUsage = z.object({
  images: count,
  usage: z.array(z.object({ type: z.string(), requests: count, credits: z.number() })),
  status: z.enum(['pending', 'published']).optional(),
  deleted: z.boolean().optional(),
});

export const usage = z
  .object({
    credits: allowance.extend({
      remaining: count.optional(),
      used: z.number().min(0),
      month: z.number().int().min(1).max(12),
      year: z.number().int(),
    }),
    images: allowance.extend({
      remaining: count.optional(),
      processed: count,
      total: count,
      year: z.number().int(),
    }),
    datasets: z.record(z.string(), datasetUsage),
    lastUpdated: isoTime,
    requestCredits: z.record(z.enum(REQUEST_TYPES), z.number().min(0)),
  })
  .meta({ id: 'Usage' });

export const listEntry = z.object({ id: z.string(), url: z.string(), processed: z.boolean() });

export const processingError = z.object({
  id: z.string(),
  url: z.string(),
  code: z.string(),
  message: z.string(),
  attempts: count,
  occurred_at: isoTime,
});

const facet = z.object({
  buckets: z.array(z.object({ value: z.string(), count })),
  other: count,
  missing: count,
  exact: z
    .literal(false)
    .optional()
    .meta({ description: 'Group counts estimated: more matching groups than counted exactly' }),
});
const stats = z.object({
  count,
  min: z.number().nullable(),
  max: z.number().nullable(),
  avg: z.number().nullable(),
  sum: z.number(),
});
const bucketBound = z.union([z.number(), isoTime]);
const histogram = z.array(z.object({ from: bucketBound, to: bucketBound, count }));

export const searchPage = ok
  .extend({
    results: z.array(resultEntry),
    total_results: count,
    total_groups: count.optional().meta({ description: 'With group: matching groups' }),
    total_groups_exact: z.boolean().optional(),
    facets: z.record(z.string(), facet).optional(),
    stats: z.record(z.string(), stats).optional(),
    histograms: z
      .record(z.string(), histogram)
      .optional()
      .meta({ description: 'Bounds are ISO 8601 for service_created_at/service_updated_at' }),
  })
  .meta({ id: 'SearchPage' });

export const results = ok.extend({ results: z.array(resultEntry) });

/** Similarity results (contract §7, §15): with exhaustive, how many items were ranked. */
export const ranked = results.extend({
  total_results: count
    .optional()
    .meta({ description: 'With exhaustive=true: the items matching q that were ranked' }),
});

const rankedCounts = <K extends string>(key: K) =>
  z.array(z.object({ [key]: z.string(), count } as Record<K, z.ZodString | typeof count>));

export const report = z
  .object({
    from: isoTime,
    to: isoTime,
    interval: z.string(),
    intervals: z.array(
      z.object({
        from: isoTime,
        to: isoTime,
        requests: z.record(z.string(), count),
        events: z.record(z.string(), count),
        searches: count,
        zero_result_searches: count,
      }),
    ),
    searches: z.object({
      count,
      zero_results: count,
      zero_result_share: z.number().min(0).max(1).nullable(),
    }),
    top_filters: rankedCounts('filter'),
    top_sort_fields: rankedCounts('field'),
    top_clicked_ids: rankedCounts('id'),
    click_through: z.record(
      z.string(),
      z.object({ shown: count, clicks: count, rate: z.number().nullable() }),
    ),
  })
  .meta({ id: 'AnalyticsReport' });
