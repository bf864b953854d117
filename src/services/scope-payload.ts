import { z } from 'zod';
import { invalid, type ErrorDetail } from '../domain/errors';
import { LIMITS } from '../domain/limits';
import { REQUEST_TYPES } from '../domain/plan';

/**
 * A scoped token's payload (contract §16). Strict: a key this server does not know makes the
 * token malformed, so a restriction added later is never silently ignored by an older server.
 * `types` names billable request types (details, fields and track are always allowed); empty
 * `types` or `fields` are narrowing too (none; no metadata).
 */
export const scopePayloadSchema = z.strictObject({
  q: z.string().max(LIMITS.qMaxLength).optional(),
  exp: z.number().int().min(0).optional(),
  types: z
    .array(z.enum(REQUEST_TYPES))
    .refine((t) => new Set(t).size === t.length, 'types must not repeat')
    .optional(),
  fields: z
    .array(z.string().min(1).max(LIMITS.metadataKeyMaxLength))
    .max(LIMITS.scopedFieldsMax)
    .optional(),
  rate: z.number().int().min(1).max(LIMITS.scopedRateMax).optional(),
  uid: z.string().min(1).max(LIMITS.scopedUidMaxLength).optional(),
});

/** What a scoped token carries; every key optional (contract §16). */
export type ScopePayload = z.infer<typeof scopePayloadSchema>;

/** A payload as a client sends it to be minted: 400 naming every bad key. */
export function checkPayload(raw: unknown): ScopePayload {
  const r = scopePayloadSchema.safeParse(raw);
  if (r.success) return r.data;
  const details: ErrorDetail[] = r.error.issues.map((i) => ({
    field: i.path.length
      ? i.path.join('.')
      : i.code === 'unrecognized_keys'
        ? (i.keys?.join(',') ?? '')
        : '',
    message: i.message,
  }));
  throw invalid(
    `the token payload is not valid: ${details.map((d) => `${d.field}: ${d.message}`).join('; ')}`,
    details,
  );
}
