import fs from 'node:fs';
import path from 'node:path';
import {
  figuresBody,
  facetsBody,
  histogramsBody,
  knnBody,
  rangeEndBody,
  rankedCountBody,
  sampleBody,
  searchBody,
} from '../../src/adapters/elasticsearch/dsl';
import {
  clickPairsBody,
  reportBody,
  shownPairsBody,
} from '../../src/adapters/elasticsearch/report';
import {
  groupCountsBody,
  groupEstimateBody,
  groupFacetBody,
  groupFacetEstimateBody,
  groupItemsBody,
  groupTotalsBody,
  scanBody,
} from '../../src/adapters/elasticsearch/groups-dsl';
import { parseQ } from '../../src/query/parse';
import { resolveFilters } from '../../src/query/resolve';
import type { ValueKind } from '../../src/domain/metadata';

/**
 * Golden files pin the query DSL the engine sends for representative requests. After an
 * intended change, regenerate with `UPDATE_GOLDEN=1 npx jest dsl-golden` and review the diff.
 */
const DIR = path.join(__dirname, '../fixtures/es-dsl');
const catalogue = new Map<string, Set<ValueKind>>([['sizes', new Set<ValueKind>(['string[]'])]]);
const conditions = (q: string) =>
  resolveFilters(parseQ(q), { enabled: { sizes: ['*'] }, catalogue, settingsPath: '/x' });

const reportSpec = {
  from: Date.parse('2026-11-02T00:00:00Z'),
  to: Date.parse('2026-11-30T00:00:00Z'),
  interval: 'week' as const,
  top: 10,
};

const cases: Record<string, () => unknown> = {
  report: () => reportBody('ds-1', reportSpec),
  'report-click-pairs': () => clickPairsBody('ds-1', reportSpec, { pv: 'p1', id: 'sku-9' }),
  'report-shown-pairs': () =>
    shownPairsBody('ds-1', [
      { pv: 'p1', id: 'sku-1' },
      { pv: 'p1', id: 'sku-2' },
      { pv: 'p2', id: 'sku-1' },
    ]),
  'default-sort': () =>
    searchBody({
      conditions: [],
      sort: { field: 'service_updated_at', order: 'desc' },
      offset: 0,
      limit: 10,
    }),
  'filters-and-metadata-sort': () =>
    searchBody({
      conditions: conditions(
        'category:boots|10|true,colour:!red,price:10:,sizes:s,sizes:m,text:red%20dress,service_created_at:1700000000000:',
      ),
      sort: { field: 'price', order: 'asc' },
      offset: 20,
      limit: 10,
    }),
  facets: () => facetsBody(conditions('instock:true'), ['category', 'price']),
  'filtered-knn': () =>
    knnBody(
      {
        vector: [0.6, 0.8, 0],
        embedder: 'descriptor-v1',
        conditions: conditions('category:boots,colour:!red,price::50'),
        limit: 9,
        excludeIds: ['sku-1'],
      },
      { candidates: 200, size: 9 },
    ),
  'ranked-count': () =>
    rankedCountBody({
      embedder: 'descriptor-v1',
      conditions: conditions('category:boots'),
      excludeIds: ['sku-1'],
    }),
  'exact-range-end': () =>
    rangeEndBody(
      { embedder: 'descriptor-v1', conditions: conditions('category:boots'), excludeIds: [] },
      'sku-0999',
      10_000,
    ),
  'explore-sample': () => sampleBody(conditions('category:boots'), 10, 12345),
  'figures-facets-stats-ranges': () =>
    figuresBody(conditions('category:boots|flats,price:10:,sizes:s'), {
      facets: [
        { field: 'category', disjunctive: true },
        { field: 'sizes', disjunctive: false },
      ],
      facetSize: 5,
      stats: ['price'],
      histograms: [
        { field: 'price', interval: 25 },
        { field: 'service_created_at', calendar: 'week' },
      ],
    }),
  'typed-filter-or-not-exists': () =>
    searchBody({
      conditions: [
        {
          kind: 'any',
          of: [
            [{ kind: 'match', field: 'color', values: ['red'] }],
            [{ kind: 'range', field: 'size', lte: 3 }],
          ],
        },
        { kind: 'none', of: [{ kind: 'exists', field: 'color' }] },
      ],
      sort: { field: 'service_updated_at', order: 'desc' },
      offset: 0,
      limit: 2,
    }),
  'group-scan': () =>
    scanBody(
      {
        conditions: conditions('category:boots'),
        sort: { field: 'price', order: 'asc' },
        offset: 20,
        limit: 10,
      },
      'parent',
      120,
      [12.5, null, 'sku-7'],
    ),
  'group-items': () =>
    groupItemsBody(
      {
        conditions: conditions('category:boots'),
        sort: { field: 'service_updated_at', order: 'desc' },
        offset: 0,
        limit: 10,
      },
      'parent',
      'n:42',
      3,
    ),
  'group-totals': () => groupTotalsBody(conditions('instock:true'), 'parent', 10_000),
  'group-estimate': () => groupEstimateBody(conditions('instock:true'), 'parent'),
  'group-counts': () => groupCountsBody(conditions('instock:true'), 'parent', ['t:p-1', 'n:7']),
  'group-facet-partition': () =>
    groupFacetBody(conditions('category:boots|flats'), 'parent', ['color', 'sizes'], 0, 4),
  'group-facet-estimate': () =>
    groupFacetEstimateBody(conditions('category:boots|flats'), 'parent', 'color', 1000),
  'figures-histograms': () =>
    histogramsBody(conditions('category:boots'), [
      { field: 'price', interval: 25 },
      { field: 'service_created_at', calendar: 'hour' },
      { field: 'service_updated_at', calendar: 'month' },
    ]),
};

describe('Elasticsearch DSL golden files', () => {
  it.each(Object.keys(cases))('%s', (name) => {
    const file = path.join(DIR, `${name}.json`);
    const actual = `${JSON.stringify(cases[name](), null, 2)}\n`;
    // Only the explicit flag writes: a missing file is a failure like a changed one.
    if (process.env.UPDATE_GOLDEN) {
      fs.mkdirSync(DIR, { recursive: true });
      fs.writeFileSync(file, actual);
    }
    if (!fs.existsSync(file))
      throw new Error(`${file} is missing; UPDATE_GOLDEN=1 writes it (review the diff)`);
    expect(actual).toBe(fs.readFileSync(file, 'utf8'));
  });

  it('has no golden file without its case (an orphan pins nothing)', () => {
    const files = fs.readdirSync(DIR).filter((f) => f.endsWith('.json'));
    expect(files.map((f) => f.replace(/\.json$/, '')).sort()).toEqual(Object.keys(cases).sort());
  });

  it('never emits query_string or script clauses', () => {
    for (const name of Object.keys(cases)) {
      const text = JSON.stringify(cases[name]());
      expect(text).not.toMatch(/query_string|simple_query_string|"script"/);
    }
  });
});
