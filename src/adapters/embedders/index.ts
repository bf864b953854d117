import type { EmbedderKind, ModelPrecision } from '../../config/env';
import type { Embedder } from '../../ports/embedder';
import { DescriptorEmbedder } from './descriptor';
import { EfficientNetEmbedder } from './efficientnet';
import { HybridEmbedder } from './hybrid';
import { OnnxEmbedder } from './onnx';
import type { SessionOptions } from './serial-session';

/**
 * The default's mix: each part's unit vector weighted, so an item pair's cosine is
 * (0.525² × the descriptor's + 0.475² × the CNN's) ÷ (0.525² + 0.475²), chosen on the shapes,
 * MNIST and food sets together (docs/embedders.md gives the rule and the figures). The id names
 * the weights: changing them
 * re-embeds every dataset.
 */
export const HYBRID_WEIGHTS = { descriptor: 0.525, efficientnet: 0.475 };

export function hybridId(w = HYBRID_WEIGHTS, precision: ModelPrecision = 'float32'): string {
  const pct = (x: number) => +((x / (w.descriptor + w.efficientnet)) * 100).toFixed(1);
  const model = precision === 'int8' ? '-int8' : '';
  return `hybrid-d${pct(w.descriptor)}e${pct(w.efficientnet)}${model}-v1`;
}

/** The model session's options (threads, batch, metric and warning hooks), and which model. */
export interface EmbedderOptions extends SessionOptions {
  modelPath?: string;
  precision?: ModelPrecision;
  weights?: typeof HYBRID_WEIGHTS;
}

/** The process's embedder (one model session, shared by workers and lens). */
export async function createEmbedder(
  kind: EmbedderKind,
  opts: EmbedderOptions = {},
): Promise<Embedder> {
  const { modelPath, weights, precision, ...session } = opts;
  switch (kind) {
    case 'descriptor':
      return new DescriptorEmbedder();
    case 'onnx':
      return OnnxEmbedder.load(modelPath!, session);
    case 'efficientnet':
      return EfficientNetEmbedder.load({ ...session, precision });
    case 'hybrid': {
      const w = weights ?? HYBRID_WEIGHTS;
      // The int8 variant's vectors are new anyway, so it also takes the cheaper resample for
      // the descriptor's input; the float variant keeps the vectors its id stands for.
      return new HybridEmbedder(
        hybridId(w, precision),
        [
          { embedder: new DescriptorEmbedder(), weight: w.descriptor },
          {
            embedder: await EfficientNetEmbedder.load({ ...session, precision }),
            weight: w.efficientnet,
          },
        ],
        precision === 'int8' ? 'area' : 'lanczos',
      );
    }
  }
}
