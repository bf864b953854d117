import { z } from 'zod';
import { imageUrlProblem, itemIdProblem } from '../../../domain/content';
import { LIMITS } from '../../../domain/limits';
import { metadataProblems, valueProblem } from '../../../domain/metadata';
import { DATASET_NAME, ORG_NAME } from '../../../domain/names';
import { REQUEST_TYPES } from '../../../domain/plan';
import { scopePayloadSchema } from '../../../services/scope-payload';

// Request bodies. Each schema is checked before the service runs; where a domain rule already
// words a problem (ids, urls, metadata), the schema calls that rule, so REST and GraphQL refuse
// the same values with the same words.

type Check = (v: unknown) => string | undefined;
const by =
  (check: Check) =>
  (v: unknown, ctx: z.RefinementCtx): void => {
    const problem = check(v);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  };

const itemId = z
  .string()
  .superRefine(by(itemIdProblem))
  .meta({ description: 'Unique within the dataset', maxLength: LIMITS.itemIdMaxLength });

const imageUrl = z.string().superRefine(by(imageUrlProblem)).meta({
  description: 'http(s) URL of a jpeg or png image',
  format: 'uri',
  maxLength: LIMITS.urlMaxLength,
});

const scalarsOrArrays = [
  z.string(),
  z.number(),
  z.boolean(),
  z.array(z.string()),
  z.array(z.number()),
] as const;

/** Metadata: the value types here, the lengths and reserved names by the domain rule. */
function metadata(field: 'metadata' | 'privateMetadata', patch: boolean) {
  // Worded by the domain rule, so REST and GraphQL refuse a value with the same words.
  const error = (issue: { input?: unknown }) => valueProblem(issue.input, patch);
  const value = patch
    ? z.union([...scalarsOrArrays, z.null()], { error })
    : z.union(scalarsOrArrays, { error });
  return z
    .record(z.string(), value)
    .superRefine((m, ctx) => {
      for (const p of metadataProblems(m, field, patch))
        ctx.addIssue({
          code: 'custom',
          message: p.message,
          path: p.field && p.field !== field ? [p.field.slice(field.length + 1)] : [],
        });
    })
    .meta({
      description: patch
        ? 'Keys given are added or replaced; a null value removes the key'
        : 'Replaces the item’s metadata when present',
    })
    .optional();
}

const contentItem = (mode: 'post' | 'put') =>
  z.strictObject({
    id: itemId,
    url: mode === 'post' ? imageUrl : imageUrl.optional(),
    metadata: metadata('metadata', mode === 'put'),
    privateMetadata: metadata('privateMetadata', mode === 'put'),
  });

export const contentBatch = (mode: 'post' | 'put') =>
  z.object({ content: z.array(contentItem(mode)) }).meta({
    description:
      mode === 'post'
        ? 'Items to add or replace; a batch with a bad item stores nothing'
        : 'Items to update partially; a batch with a bad item stores nothing',
  });

export const deleteContent = z.union(
  [
    z.object({ ids: z.array(z.string()).max(LIMITS.deleteMaxIds) }),
    z
      .object({ content: z.array(z.object({ id: z.string() })).max(LIMITS.deleteMaxIds) })
      .meta({ description: 'The original vendor’s form, accepted too' }),
  ],
  { error: 'expected { "ids": [ … ] }' },
);

const allowance = z.object({
  limitType: z.enum(['fixed', 'unlimited']),
  limit: z.number().int().min(0).optional().meta({ description: 'Required when fixed' }),
});

const planInput = z
  .object({
    credits: allowance.optional().meta({ description: 'Vision API credits per month' }),
    images: allowance.optional().meta({ description: 'Images processed per year' }),
    requestCredits: z
      .partialRecord(z.enum(REQUEST_TYPES), z.number().min(0))
      .optional()
      .meta({ description: 'Credits per request type' }),
  })
  .meta({ description: 'Missing parts take their defaults (unlimited)' });

export const createOrganisation = z.object({
  name: z.string().regex(ORG_NAME, { error: 'expected 1–64 characters of a-z, 0-9, _ or -' }),
  plan: planInput.optional(),
});

export const setPlan = z.object({ plan: planInput });

export const createDataset = z.object({
  name: z
    .string()
    .regex(DATASET_NAME, { error: 'expected 1–100 characters of letters, digits, - or _' }),
});

export const enabledFields = z.object({
  fields: z.record(z.string(), z.array(z.union([z.string(), z.number()])).min(1)).meta({
    description: `Array field → values enabled for q; ["*"] enables every value. At most ${LIMITS.indexedArrayValues} values in all`,
  }),
});

export const similaritySettings = z.strictObject({
  learn_from: z.string().nullable().meta({
    description:
      "A metadata field holding each item's label (a string); null switches tuning off (contract §20)",
  }),
  weight: z
    .number()
    .optional()
    .meta({ description: 'Share of the tuned cosine in the ranking, 0–1 (default 0.75)' }),
});

export const scopedToken = scopePayloadSchema.meta({
  description:
    'The token payload (contract §16), every key optional: q, exp (Unix seconds), types, fields, rate (per minute), uid',
});

export const lens = z.object({
  image: z.string().meta({ description: 'A base64 data URI of a jpeg or png image' }),
});

export const track = z.object({
  events: z
    .array(
      z.object({
        v: z.string().meta({ description: 'a:<action> and other key:value pairs' }),
        timestamp: z
          .union([z.string(), z.number()])
          .optional()
          .meta({ description: 'ISO 8601 or epoch milliseconds; now when absent' }),
      }),
    )
    .max(LIMITS.trackMaxEvents),
});
