import { invalid, type ErrorDetail } from '../domain/errors';
import type { EnabledFields } from '../domain/dataset';
import { isServiceTimeField } from '../domain/limits';
import type { ValueKind } from '../domain/metadata';
import type { Condition, Filter } from './ast';

/** Which value kinds each metadata field holds in the dataset (maintained by the store). */
export type FieldCatalogue = ReadonlyMap<string, ReadonlySet<ValueKind>>;

export interface ResolveContext {
  enabled: EnabledFields;
  catalogue: FieldCatalogue;
  /** Path of the settings endpoint, named in errors so the client knows how to fix them. */
  settingsPath: string;
}

const isArrayField = (
  ctx: Pick<ResolveContext, 'enabled' | 'catalogue'>,
  field: string,
): boolean => {
  // Own keys only: a client's field may be named `constructor` or `__proto__`.
  if (Object.hasOwn(ctx.enabled, field)) return true;
  const kinds = ctx.catalogue.get(field);
  return !!kinds && (kinds.has('string[]') || kinds.has('number[]'));
};

/**
 * The §5 rule for an array field, whoever asks (q, the typed filter, figures): it must be
 * enabled, and with all its values (`*`) for anything that reads numbers (a range, stats, a
 * histogram). The problem as a sentence naming the fix, or undefined.
 */
export function arrayFieldProblem(
  ctx: ResolveContext,
  field: string,
  needAll: boolean,
): string | undefined {
  if (!isArrayField(ctx, field)) return undefined;
  const enabled = Object.hasOwn(ctx.enabled, field) ? ctx.enabled[field] : undefined;
  if (!enabled)
    return `array field '${field}' is not enabled for querying; enable it with PUT ${ctx.settingsPath}`;
  if (needAll && !enabled.includes('*'))
    return `array field '${field}' needs all its values enabled ("*") via PUT ${ctx.settingsPath}`;
  return undefined;
}

/**
 * Applies the dataset's rules to parsed filters: array fields must be enabled (with the values
 * used), repeated array keys AND together, repeated scalar keys keep the last filter.
 */
export function resolveFilters(filters: Filter[], ctx: ResolveContext): Condition[] {
  const problems: ErrorDetail[] = [];
  const arrayConds: Condition[] = [];
  const scalarConds = new Map<string, Condition>();
  for (const f of filters) {
    if (f.kind === 'text') {
      scalarConds.set('\u0000text', { kind: 'text', terms: f.terms });
      continue;
    }
    if (isServiceTimeField(f.key) && f.kind === 'range') {
      scalarConds.set(f.key, { kind: 'timeRange', field: f.key, gte: f.gte, lte: f.lte });
      continue;
    }
    const cond: Condition =
      f.kind === 'range'
        ? { kind: 'range', field: f.key, gte: f.gte, lte: f.lte }
        : { kind: f.kind === 'eq' ? 'match' : 'exclude', field: f.key, values: f.values };
    if (!isArrayField(ctx, f.key)) {
      scalarConds.set(f.key, cond);
      continue;
    }
    const problem = arrayFieldProblem(ctx, f.key, f.kind === 'range');
    if (problem) {
      problems.push({ param: 'q', position: f.pos, field: f.key, message: problem });
      continue;
    }
    const enabled = ctx.enabled[f.key]!;
    const all = enabled.includes('*');
    if (f.kind !== 'range' && !all) {
      const off = f.values.filter((v) => !enabled.includes(v));
      if (off.length) {
        problems.push({
          param: 'q',
          position: f.pos,
          field: f.key,
          value: off[0],
          message: `value${off.length > 1 ? 's' : ''} ${off.map((v) => `'${v}'`).join(', ')} of array field '${f.key}' not enabled for querying; enable with PUT ${ctx.settingsPath}`,
        });
        continue;
      }
    }
    arrayConds.push(cond);
  }
  if (problems.length) throw invalid(problems[0].message, problems);
  return [...arrayConds, ...scalarConds.values()];
}
