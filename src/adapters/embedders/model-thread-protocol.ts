/**
 * The messages between SerialSession (serial-session.ts, the main side) and the model's thread
 * (model-thread.ts). Types only: both sides import it, and nothing of it runs.
 */

/** What the thread is started with (its `workerData`). */
export interface ThreadData {
  /** The ONNX model's bytes. */
  model: Uint8Array;
  /** Threads of one run. */
  threads: number;
  /** Most images in one run, when the model's batch dimension is free. */
  maxBatch: number;
}

/** One image to run: NCHW float input of 3 × size × size. */
export interface Item {
  id: number;
  input: Float32Array;
  size: number;
}

/** To the thread: images to run, their buffers handed over. */
export interface Request {
  items: Item[];
}

/** From the thread, once: the model loaded, or why it did not. */
export type Handshake =
  | {
      type: 'ready';
      /** The side of the square input the model takes. */
      side: number;
      /** Most images one run takes (1 when the model cannot take a batch). */
      maxBatch: number;
      /** False when the model's batch dimension is fixed at more than one image. */
      batchable: boolean;
      /** Why the model is given one image a run although it declares a free batch. */
      degraded?: string;
    }
  | { type: 'failed'; error: string };

/** From the thread after the handshake: one per image, and a notice when batches are given up. */
export type Reply =
  | {
      type: 'result';
      id: number;
      data: Float32Array;
      /** The run's number of images on the first image of each run that succeeded, else 0. */
      batch: number;
    }
  | { type: 'error'; id: number; error: string }
  | { type: 'degraded'; reason: string };
