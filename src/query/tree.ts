/**
 * Typed filters (GraphQL `filter`): per-field tests combined with and / or / not, compiled to
 * the same Condition AST as `q`, leaves through the same dataset rules (resolve.ts), so a typed
 * filter and the equivalent `q` select the same items on both engines.
 */
import { AppError, invalid, type ErrorDetail } from '../domain/errors';
import type { Condition, Filter } from './ast';
import { resolveFilters, type ResolveContext } from './resolve';

/** GraphQL gives null for an argument written as null: it means absent here. */
interface FieldTest {
  field: string;
  eq?: string | null;
  in?: string[] | null;
  not?: string[] | null;
  range?: { gte?: number | null; lte?: number | null } | null;
  exists?: boolean | null;
}

export interface FilterTree {
  where?: FieldTest | null;
  and?: FilterTree[] | null;
  or?: FilterTree[] | null;
  not?: FilterTree | null;
}

const MAX_NODES = 200;

/** The conjunction a tree stands for; 400 naming `filter` for what the dataset refuses. */
export function compileFilterTree(tree: FilterTree, ctx: ResolveContext): Condition[] {
  let nodes = 0;
  const leaf = (t: FieldTest): Condition[] => {
    const filters: Filter[] = [];
    const base = { key: t.field, pos: 0 };
    if (t.eq != null) filters.push({ kind: 'eq', ...base, values: [t.eq] });
    if (t.in) {
      if (!t.in.length) throw bad(`'${t.field}': in needs at least one value`);
      filters.push({ kind: 'eq', ...base, values: t.in });
    }
    if (t.not) {
      if (!t.not.length) throw bad(`'${t.field}': not needs at least one value`);
      filters.push({ kind: 'not', ...base, values: t.not });
    }
    if (t.range) {
      const gte = t.range.gte ?? undefined;
      const lte = t.range.lte ?? undefined;
      if (gte === undefined && lte === undefined) throw bad(`'${t.field}': range needs gte or lte`);
      filters.push({ kind: 'range', ...base, gte, lte });
    }
    const out: Condition[] = [];
    // One test per filter: q's "the last one wins" for repeated scalar keys must not apply.
    for (const f of filters) out.push(...resolveLeaf(f, ctx));
    if (t.exists != null) {
      const e: Condition = { kind: 'exists', field: t.field };
      out.push(t.exists ? e : { kind: 'none', of: [e] });
    }
    if (!out.length) throw bad(`'${t.field}': give eq, in, not, range or exists`);
    return out;
  };
  const walk = (t: FilterTree): Condition[] => {
    if (++nodes > MAX_NODES) throw bad(`at most ${MAX_NODES} filter nodes`);
    const out: Condition[] = [];
    if (t.where) out.push(...leaf(t.where));
    for (const c of t.and ?? []) out.push(...walk(c));
    if (t.or) out.push({ kind: 'any', of: t.or.map(walk) });
    if (t.not) out.push({ kind: 'none', of: walk(t.not) });
    return out;
  };
  return walk(tree);
}

function resolveLeaf(f: Filter, ctx: ResolveContext): Condition[] {
  try {
    return resolveFilters([f], ctx);
  } catch (e) {
    if (!(e instanceof AppError)) throw e;
    // The same rule as q, named for the typed filter (no position in a string to point at).
    const details: ErrorDetail[] = (e.details ?? []).map(({ position: _p, ...d }) => ({
      ...d,
      param: 'filter',
    }));
    throw invalid(e.message, details);
  }
}

const bad = (message: string) => invalid(`filter: ${message}`, [{ param: 'filter', message }]);
