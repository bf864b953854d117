import { invalid } from './errors';
import { LIMITS } from './limits';

export const ORG_NAME = /^[a-z0-9_-]{1,64}$/;
export const DATASET_NAME = /^[A-Za-z0-9_-]{1,100}$/;

export function assertOrgName(name: unknown): string {
  if (typeof name !== 'string' || !ORG_NAME.test(name)) {
    throw invalid(`organisation name must be 1–${LIMITS.orgNameMax} of [a-z0-9_-]`, [
      { field: 'name', message: 'expected 1–64 characters of a-z, 0-9, _ or -' },
    ]);
  }
  return name;
}

export function assertDatasetName(name: unknown): string {
  if (typeof name !== 'string' || !DATASET_NAME.test(name)) {
    throw invalid(`dataset name must be 1–${LIMITS.datasetNameMax} letters, digits, - or _`, [
      { field: 'name', message: 'expected 1–100 characters of letters, digits, - or _' },
    ]);
  }
  return name;
}
