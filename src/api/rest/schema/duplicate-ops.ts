import { z } from 'zod';
import { operation } from '../operation';
import { datasetParams, decimal, flag, integer, text } from './params';
import * as shape from './shapes';

// The near-duplicate report (contract §18): organisation token, free.

const DS = '/orgs/:organisation/datasets/:dataset';

const group = z.object({
  id: z.string().meta({ description: 'Stable while the group keeps its first item' }),
  kind: z.enum(['exact', 'near']),
  items: z.array(
    z.object({
      id: z.string(),
      distance: z.number().min(0).meta({ description: 'Cosine distance to the first item' }),
    }),
  ),
});

export const duplicates = operation({
  id: 'duplicates',
  method: 'GET',
  path: `${DS}/duplicates`,
  summary: 'Groups of items showing the same picture or near copies (contract §18)',
  tag: 'datasets',
  access: 'organisation',
  params: datasetParams,
  query: z.object({
    kind: text('exact or near (default: both, exact groups first)'),
    max_distance: decimal('Cosine distance, 0 < d ≤ 0.2 (default: the embedder’s)'),
    exclude_same_parent: flag('Leave out pairs sharing `parent`'),
    limit: integer('Groups per page, 1–100 (default 20)'),
    cursor: text('next_cursor of the previous page'),
  }),
  status: 200,
  response: shape.ok.extend({
    computed_at: z.string().meta({ format: 'date-time' }).nullable(),
    pending: z.boolean().meta({ description: 'Items processed since wait for the next pass' }),
    groups: z.array(group),
    next_cursor: z.string().nullable(),
  }),
  errors: ['invalid_request', 'not_found'],
});

export const dismissDuplicates = operation({
  id: 'dismissDuplicates',
  method: 'POST',
  path: `${DS}/duplicates/dismiss`,
  summary: 'Record that these items are not duplicates of each other (contract §18)',
  tag: 'datasets',
  access: 'organisation',
  params: datasetParams,
  body: z.object({ ids: z.array(z.string().min(1)).min(2).max(100) }),
  status: 200,
  response: shape.ok,
  errors: ['invalid_request', 'not_found'],
});
