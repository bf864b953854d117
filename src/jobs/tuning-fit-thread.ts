/**
 * tuning-fit-thread runs as a worker thread: a similarity fit and its cross-validation take
 * seconds of CPU (tuning-fit.ts), which on the main thread would hold every request of the
 * process. It fits once and answers once.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { fitAndValidate } from '../domain/tuning/cross-validation';
import { serialise } from '../domain/tuning/lda';
import type { FitInput, FitOutput } from './tuning-fit';

const input = workerData as FitInput;
const items = input.labels.map((label, i) => ({
  vector: input.vectors.subarray(i * input.dims, (i + 1) * input.dims),
  label,
  group: input.groups[i]!,
}));
const { projection, cv } = fitAndValidate(items, { weight: input.weight });
const out: FitOutput = { model: serialise(projection), cv };
parentPort!.postMessage(out, [out.model.buffer as ArrayBuffer]);
