import os from 'node:os';
import type { EmbedderKind } from '../../config/env';
import type { Embedder } from '../../ports/embedder';
import { DescriptorEmbedder } from './descriptor';
import { EfficientNetEmbedder } from './efficientnet';
import { HybridEmbedder } from './hybrid';
import { OnnxEmbedder } from './onnx';

/**
 * The default's mix: each part's unit vector weighted, so an item pair's cosine is
 * (0.525² × the descriptor's + 0.475² × the CNN's) ÷ (0.525² + 0.475²). Chosen by
 * bench/similarity-quality.ts on the shapes, MNIST and food sets together (the rule and the
 * figures: bench/results/similarity-quality.json). The id names the weights: changing them
 * re-embeds every dataset.
 */
export const HYBRID_WEIGHTS = { descriptor: 0.525, efficientnet: 0.475 };

export function hybridId(w = HYBRID_WEIGHTS): string {
  const pct = (x: number) => +((x / (w.descriptor + w.efficientnet)) * 100).toFixed(1);
  return `hybrid-d${pct(w.descriptor)}e${pct(w.efficientnet)}-v1`;
}

export interface EmbedderOptions {
  modelPath?: string;
  /** Threads of the model's runs (default: the machine's cores; runs are serialised). */
  threads?: number;
  weights?: typeof HYBRID_WEIGHTS;
  /** Most images in one model run (default DEFAULT_MAX_BATCH). */
  maxBatch?: number;
  /** Told the number of images of every model run (the batch-size metric). */
  onRun?: (images: number) => void;
}

/** The process's embedder (one model session, shared by workers and lens). */
export async function createEmbedder(
  kind: EmbedderKind,
  opts: EmbedderOptions = {},
): Promise<Embedder> {
  const session = {
    threads: opts.threads ?? os.availableParallelism(),
    maxBatch: opts.maxBatch,
    onRun: opts.onRun,
  };
  switch (kind) {
    case 'descriptor':
      return new DescriptorEmbedder();
    case 'onnx':
      return OnnxEmbedder.load(opts.modelPath!, session);
    case 'efficientnet':
      return EfficientNetEmbedder.load(session);
    case 'hybrid': {
      const w = opts.weights ?? HYBRID_WEIGHTS;
      return new HybridEmbedder(hybridId(w), [
        { embedder: new DescriptorEmbedder(), weight: w.descriptor },
        { embedder: await EfficientNetEmbedder.load(session), weight: w.efficientnet },
      ]);
    }
  }
}
