import { literalForms, type Condition } from '../../src/query/ast';
import type { SearchRequest } from '../../src/ports/search-engine';
import { isServiceTimeField } from '../../src/domain/limits';
import { QUERYABLE_SCOPES } from '../../src/adapters/value-index';

export interface Sql {
  sql: string;
  params: unknown[];
}

const TIME_COLUMN = {
  service_created_at: 'i.created_at',
  service_updated_at: 'i.updated_at',
} as const;

const marks = (n: number): string => Array.from({ length: n }, () => '?').join(', ');

/** Restricts item_values rows to what the Vision API may read (never privateMetadata). */
export const QUERYABLE = `scope IN (${QUERYABLE_SCOPES.map((s) => `'${s}'`).join(', ')})`;

/** The item pks (in this dataset) holding any of `values` in `field`, as contract §5 matches them. */
function matchingPks(field: string, values: string[]): Sql {
  const forms = values.map(literalForms);
  const strs = forms.map((f) => f.str);
  const nums = forms.flatMap((f) => (f.num !== undefined ? [f.num] : []));
  const bools = forms.flatMap((f) => (f.bool !== undefined ? [String(f.bool)] : []));
  const ors = [`(vtype = 's' AND sval IN (${marks(strs.length)}))`];
  const params: unknown[] = [...strs];
  if (nums.length) {
    ors.push(`(vtype = 'n' AND nval IN (${marks(nums.length)}))`);
    params.push(...nums);
  }
  if (bools.length) {
    ors.push(`(vtype = 'b' AND sval IN (${marks(bools.length)}))`);
    params.push(...bools);
  }
  return {
    sql: `SELECT item_pk FROM item_values WHERE dataset_id = ? AND field = ? AND ${QUERYABLE} AND (${ors.join(' OR ')})`,
    params: [field, ...params],
  };
}

/** Lowers one condition to a predicate on `items i`. The dataset id is always the first param. */
function lowerCondition(c: Condition, datasetId: string): Sql {
  switch (c.kind) {
    case 'match':
    case 'exclude': {
      const sub = matchingPks(c.field, c.values);
      return {
        sql: `i.pk ${c.kind === 'exclude' ? 'NOT IN' : 'IN'} (${sub.sql})`,
        params: [datasetId, ...sub.params],
      };
    }
    case 'range': {
      const bounds: string[] = [];
      const params: unknown[] = [datasetId, c.field];
      if (c.gte !== undefined) {
        bounds.push('nval >= ?');
        params.push(c.gte);
      }
      if (c.lte !== undefined) {
        bounds.push('nval <= ?');
        params.push(c.lte);
      }
      return {
        sql: `i.pk IN (SELECT item_pk FROM item_values WHERE dataset_id = ? AND field = ? AND ${QUERYABLE} AND vtype = 'n' AND ${bounds.join(' AND ')})`,
        params,
      };
    }
    case 'timeRange': {
      const col = TIME_COLUMN[c.field];
      const parts: string[] = [];
      const params: unknown[] = [];
      if (c.gte !== undefined) {
        parts.push(`${col} >= ?`);
        params.push(c.gte);
      }
      if (c.lte !== undefined) {
        parts.push(`${col} <= ?`);
        params.push(c.lte);
      }
      return { sql: `(${parts.join(' AND ')})`, params };
    }
    case 'text':
      return {
        sql: c.terms
          .map(() => 'i.pk IN (SELECT item_pk FROM item_terms WHERE dataset_id = ? AND term = ?)')
          .join(' AND '),
        params: c.terms.flatMap((t) => [datasetId, t]),
      };
    case 'exists':
      return {
        sql: `i.pk IN (SELECT item_pk FROM item_values WHERE dataset_id = ? AND field = ? AND ${QUERYABLE})`,
        params: [datasetId, c.field],
      };
    case 'any': {
      const parts = c.of.map((conj) => conjunction(conj, datasetId));
      return {
        sql: `(${parts.map((p) => `(${p.sql})`).join(' OR ') || '0'})`,
        params: parts.flatMap((p) => p.params),
      };
    }
    case 'none': {
      const inner = conjunction(c.of, datasetId);
      return { sql: `NOT (${inner.sql})`, params: inner.params };
    }
    case 'ids':
      return {
        sql: c.ids.length ? `i.id IN (${c.ids.map(() => '?').join(', ')})` : '0',
        params: c.ids,
      };
  }
}

/** All of `conditions` as one predicate on `items i` (true when there are none). */
function conjunction(conditions: Condition[], datasetId: string): Sql {
  const parts = conditions.map((c) => lowerCondition(c, datasetId));
  return {
    sql: parts.length ? parts.map((p) => `(${p.sql})`).join(' AND ') : '1',
    params: parts.flatMap((p) => p.params),
  };
}

/** WHERE clause selecting the processed items of a dataset that satisfy every condition. */
export function whereClause(datasetId: string, conditions: Condition[]): Sql {
  const parts = [`i.dataset_id = ?`, `i.state = 'processed'`];
  const params: unknown[] = [datasetId];
  for (const c of conditions) {
    const l = lowerCondition(c, datasetId);
    parts.push(l.sql);
    params.push(...l.params);
  }
  return { sql: parts.join(' AND '), params };
}

export interface SortSql {
  /** Extra SELECT columns the ORDER BY refers to, and their params (they precede WHERE's). */
  columns: string;
  columnParams: unknown[];
  order: string;
}

/**
 * Sort for a field. Metadata sorts put numbers first, then strings, then items lacking the
 * field (in both orders); ties break by id ascending. Elasticsearch reproduces this order.
 */
export function sortSql(sort: SearchRequest['sort']): SortSql {
  const dir = sort.order === 'asc' ? 'ASC' : 'DESC';
  if (isServiceTimeField(sort.field))
    return {
      columns: '',
      columnParams: [],
      order: `ORDER BY ${TIME_COLUMN[sort.field]} ${dir}, i.id ASC`,
    };
  // Metadata keys cannot take generated names, so at most one queryable scalar row matches.
  const pick = (vtype: 'n' | 's', col: 'nval' | 'sval'): string =>
    `(SELECT ${col} FROM item_values v WHERE v.item_pk = i.pk AND v.field = ? AND v.vtype = '${vtype}' AND v.is_array = 0
      AND v.${QUERYABLE} LIMIT 1)`;
  return {
    columns: `, ${pick('n', 'nval')} AS sn, ${pick('s', 'sval')} AS ss`,
    columnParams: [sort.field, sort.field],
    order: `ORDER BY (sn IS NULL), sn ${dir}, (ss IS NULL), ss ${dir}, i.id ASC`,
  };
}
