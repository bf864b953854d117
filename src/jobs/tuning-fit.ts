import { Worker } from 'node:worker_threads';
import type { CvResult } from '../domain/tuning/cross-validation';
import type { Labelled } from '../domain/tuning/lda';
import { threadFile } from '../lib/thread-file';

/** What the fitting thread is started with: the items as one matrix, their labels and groups. */
export interface FitInput {
  vectors: Float32Array;
  dims: number;
  labels: string[];
  groups: string[];
  weight: number;
}

/** The serialised projection fitted on every item, and the cross-validation's figures. */
export interface FitOutput {
  model: Uint8Array;
  cv: CvResult;
}

/**
 * Fits a projection and cross-validates it (contract §20) on a thread of its own, so the
 * process keeps answering meanwhile (seconds of CPU at a few hundred items, about 20 s at
 * the largest fit). The items' vectors move to the thread as one buffer.
 */
export async function fitInThread(items: readonly Labelled[], weight: number): Promise<FitOutput> {
  const dims = items[0]?.vector.length ?? 0;
  const odd = items.findIndex((it) => it.vector.length !== dims);
  if (odd >= 0)
    throw new Error(`item ${odd} has ${items[odd]!.vector.length} dimensions, not ${dims}`);
  const vectors = new Float32Array(items.length * dims);
  items.forEach((it, i) => vectors.set(it.vector, i * dims));
  const workerData: FitInput = {
    vectors,
    dims,
    labels: items.map((it) => it.label),
    groups: items.map((it) => it.group),
    weight,
  };
  const thread = new Worker(await threadFile(__dirname, 'tuning-fit-thread'), {
    workerData,
    transferList: [vectors.buffer as ArrayBuffer],
  });
  try {
    return await new Promise<FitOutput>((resolve, reject) => {
      thread.once('message', resolve);
      thread.once('error', reject);
      thread.once('exit', (code) => reject(new Error(`the fitting thread exited (${code})`)));
    });
  } finally {
    await thread.terminate();
  }
}
