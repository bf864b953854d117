import { invalid, type ErrorDetail } from './errors';

/**
 * How long a process prices requests and admits images with a plan it read: a plan change
 * reaches every host within this (the counts themselves are never cached).
 */
export const PLAN_TTL_MS = 1000;

type LimitType = 'fixed' | 'unlimited';
export interface Allowance {
  limitType: LimitType;
  /** Present exactly when limitType is fixed. */
  limit?: number;
}

export const REQUEST_TYPES = ['search', 'similar', 'explore', 'lens', 'collection'] as const;
export type RequestType = (typeof REQUEST_TYPES)[number];

export interface Plan {
  credits: Allowance;
  images: Allowance;
  requestCredits: Record<RequestType, number>;
}

const DEFAULT_REQUEST_CREDITS: Record<RequestType, number> = {
  search: 1,
  similar: 1,
  explore: 1,
  lens: 2,
  collection: 1,
};

export const DEFAULT_PLAN: Plan = {
  credits: { limitType: 'unlimited' },
  images: { limitType: 'unlimited' },
  requestCredits: { ...DEFAULT_REQUEST_CREDITS },
};

/** A plan as a client writes it: missing (or null) parts take their defaults. */
export interface PlanInput {
  credits?: AllowanceInput | null;
  images?: AllowanceInput | null;
  requestCredits?: Partial<Record<RequestType, number | null>> | null;
}
interface AllowanceInput {
  limitType: LimitType;
  limit?: number | null;
}

function parseAllowance(
  a: AllowanceInput | null | undefined,
  at: string,
  details: ErrorDetail[],
): Allowance {
  if (a === undefined || a === null || a.limitType === 'unlimited')
    return { limitType: 'unlimited' };
  if (a.limitType === 'fixed') {
    if (typeof a.limit !== 'number' || !Number.isInteger(a.limit) || a.limit < 0) {
      details.push({
        field: `${at}.limit`,
        message: 'a fixed allowance needs a non-negative integer limit',
      });
      return { limitType: 'unlimited' };
    }
    return { limitType: 'fixed', limit: a.limit };
  }
  details.push({ field: `${at}.limitType`, message: "limitType must be 'fixed' or 'unlimited'" });
  return { limitType: 'unlimited' };
}

/** The plan a client asked for, every problem named; absent means the default plan. */
export function parsePlan(p: PlanInput | null | undefined): Plan {
  if (p === undefined || p === null) return structuredClone(DEFAULT_PLAN);
  const details: ErrorDetail[] = [];
  const credits = parseAllowance(p.credits, 'plan.credits', details);
  const images = parseAllowance(p.images, 'plan.images', details);
  const requestCredits = { ...DEFAULT_REQUEST_CREDITS };
  for (const [type, n] of Object.entries(p.requestCredits ?? {})) {
    if (n === null || n === undefined) continue;
    if (!(REQUEST_TYPES as readonly string[]).includes(type)) {
      details.push({
        field: `plan.requestCredits.${type}`,
        message: `unknown request type (${REQUEST_TYPES.join(', ')})`,
      });
    } else if (!Number.isFinite(n) || n < 0) {
      details.push({
        field: `plan.requestCredits.${type}`,
        message: 'credits must be a non-negative number',
      });
    } else requestCredits[type as RequestType] = n;
  }
  if (details.length) throw invalid('plan is invalid', details);
  return { credits, images, requestCredits };
}
