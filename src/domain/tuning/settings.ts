import { invalid } from '../errors';
import { LIMITS } from '../limits';
import { MIN_CLASS_ITEMS } from './lda';

/** Where a dataset's tuned similarity stands (contract §20). */
export type TuningState = 'fitting' | 'active' | 'inactive' | 'off';

/** The projection's held-out figures, plain and tuned, from the dataset's own labels. */
export interface CvFigures {
  plain: number;
  tuned: number;
}

/** A dataset's similarity setting and what the last fit found (contract §20). */
export interface SimilaritySettings {
  /** The metadata field holding each item's label; null: tuning is off. */
  learnFrom: string | null;
  weight: number;
  state: TuningState;
  reason: string | null;
  /** When the last fit finished (ISO 8601). */
  fittedAt: string | null;
  labelledItems: number;
  classes: number;
  cv: CvFigures | null;
  /** The stored projection ranking uses while `active`. */
  model?: string;
  /** The embedder whose vectors the last fit learned from: another one's are refitted. */
  embedder?: string;
  /** Items per label when the last fit read them: a refit is due once they move by 10 %. */
  labelCounts?: Record<string, number>;
  /** +1 on every change of the setting: a fit begun under another revision does not land. */
  revision: number;
}

const DEFAULT_WEIGHT = 0.75;
/** A fit needs this many labels with this many items each (contract §20). */
export const MIN_CLASSES = 2;
export { MIN_CLASS_ITEMS };
/** The tuned figure must beat the plain one by this much to turn tuning on. */
export const MIN_GAIN = 0.02;
/**
 * The gain must also reach this many standard errors of itself: with few queries, labels that
 * carry no signal can measure a gain of a few hundredths by chance.
 */
export const NOISE_ERRORS = 2;
/** Labelled items moving by this share of the fitted ones make a refit due. */
export const REFIT_CHANGE = 0.1;

export const TUNING_OFF: SimilaritySettings = {
  learnFrom: null,
  weight: DEFAULT_WEIGHT,
  state: 'off',
  reason: null,
  fittedAt: null,
  labelledItems: 0,
  classes: 0,
  cv: null,
  revision: 0,
};

export interface SimilarityInput {
  learnFrom: string | null;
  weight: number;
}

/**
 * Checks a settings/similarity change whole (transports check types; this the values), every
 * mistake named by its REST field.
 */
export function checkSimilarityInput(input: {
  learnFrom: string | null;
  weight?: number | null | undefined;
}): SimilarityInput {
  const details: Array<{ field: string; message: string }> = [];
  const { learnFrom } = input;
  if (
    learnFrom !== null &&
    (learnFrom.length === 0 || learnFrom.length > LIMITS.metadataKeyMaxLength)
  )
    details.push({
      field: 'learn_from',
      message: `a metadata field name of 1–${LIMITS.metadataKeyMaxLength} characters, or null`,
    });
  const weight = input.weight ?? DEFAULT_WEIGHT;
  if (!Number.isFinite(weight) || weight < 0 || weight > 1)
    details.push({ field: 'weight', message: 'a number from 0 to 1' });
  if (details.length)
    throw invalid(
      `settings.similarity is invalid: ${details.map((d) => `${d.field} (${d.message})`).join('; ')}`,
      details,
    );
  return { learnFrom, weight };
}

/**
 * The setting after a client's change: a new field or weight is fitted again (the check
 * depends on both), switching off is at once, the same setting changes nothing.
 */
export function requested(
  current: SimilaritySettings,
  input: SimilarityInput,
): SimilaritySettings | undefined {
  if (current.learnFrom === input.learnFrom && current.weight === input.weight) return undefined;
  const revision = current.revision + 1;
  if (input.learnFrom === null) return { ...TUNING_OFF, weight: input.weight, revision };
  // a new weight is checked again, but the same items fit the same projection: it is kept
  const sameField = input.learnFrom === current.learnFrom && current.model !== undefined;
  return {
    ...TUNING_OFF,
    learnFrom: input.learnFrom,
    weight: input.weight,
    state: 'fitting',
    revision,
    ...(sameField ? { model: current.model } : {}),
  };
}

/**
 * How far the labelled items moved since the fit: the items gained, lost or moved between
 * labels, as a share of those fitted (a swap that keeps every label's count is not seen).
 */
export function labelChange(
  fitted: Readonly<Record<string, number>>,
  now: Readonly<Record<string, number>>,
): number {
  let moved = 0;
  let total = 0;
  for (const [label, n] of Object.entries(fitted)) {
    total += n;
    moved += Math.abs((now[label] ?? 0) - n);
  }
  for (const [label, n] of Object.entries(now)) if (!(label in fitted)) moved += n;
  return total === 0 ? (moved > 0 ? 1 : 0) : moved / total;
}

/** The label an item's metadata value gives: a string or a finite number, as q reads it (contract §20). */
export const labelOf = (v: unknown): string | undefined =>
  typeof v === 'string' && v !== ''
    ? v
    : typeof v === 'number' && Number.isFinite(v)
      ? String(v)
      : undefined;

/** The labels a fit can learn from: those with MIN_CLASS_ITEMS items or more. */
export const usableLabels = (counts: Readonly<Record<string, number>>): string[] =>
  Object.keys(counts).filter((l) => counts[l]! >= MIN_CLASS_ITEMS);

/** The setting as the REST dataset object carries it (contract §20). */
export const similarityBody = (s: SimilaritySettings) => ({
  learn_from: s.learnFrom,
  weight: s.weight,
  state: s.state,
  reason: s.reason,
  fitted_at: s.fittedAt,
  labelled_items: s.labelledItems,
  classes: s.classes,
  cv_precision_at_10: s.cv && { plain: s.cv.plain, tuned: s.cv.tuned },
});
