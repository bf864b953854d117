import type { EmbedderKind, ModelPrecision } from '../../config/env';
import type { Embedder } from '../../ports/embedder';
import { DescriptorEmbedder, type DescriptorWeights } from './descriptor';
import { EfficientNetEmbedder } from './efficientnet';
import { HybridEmbedder } from './hybrid';
import { OnnxEmbedder } from './onnx';
import type { SessionOptions } from './serial-session';

/**
 * The default's mix, as each block's share of an item pair's cosine: the descriptor's colour
 * histogram, colour layout and gradient orientations (whole image, per cell), and the CNN's
 * features. Chosen on the shapes, MNIST and food sets together (docs/embedders.md gives the
 * rule and the figures). The id names the shares: changing them re-embeds every dataset.
 */
export interface HybridShares extends DescriptorWeights {
  efficientnet: number;
}

export const HYBRID_SHARES: HybridShares = {
  colour: 0.225,
  layout: 0.15,
  orientation: 0,
  cellOrientation: 0.075,
  efficientnet: 0.55,
};

export function hybridId(s = HYBRID_SHARES, precision: ModelPrecision = 'float32'): string {
  const total = s.colour + s.layout + s.orientation + s.cellOrientation + s.efficientnet;
  const pct = (x: number) => +((x / total) * 100).toFixed(1);
  const model = precision === 'int8' ? '-int8' : '';
  return (
    `hybrid-c${pct(s.colour)}l${pct(s.layout)}o${pct(s.orientation)}` +
    `q${pct(s.cellOrientation)}e${pct(s.efficientnet)}${model}-v1`
  );
}

/**
 * The lengths that give those shares: a share is its block's length squared once the whole
 * vector is unit length, and the descriptor part is normalised before it is weighted.
 */
export function hybridWeights(s: HybridShares): {
  descriptor: DescriptorWeights;
  parts: { descriptor: number; efficientnet: number };
} {
  const { efficientnet, ...blocks } = s;
  return {
    descriptor: {
      colour: Math.sqrt(blocks.colour),
      layout: Math.sqrt(blocks.layout),
      orientation: Math.sqrt(blocks.orientation),
      cellOrientation: Math.sqrt(blocks.cellOrientation),
    },
    parts: {
      descriptor: Math.sqrt(
        blocks.colour + blocks.layout + blocks.orientation + blocks.cellOrientation,
      ),
      efficientnet: Math.sqrt(efficientnet),
    },
  };
}

/** The model session's options (threads, batch, metric and warning hooks), and which model. */
export interface EmbedderOptions extends SessionOptions {
  modelPath?: string;
  precision?: ModelPrecision;
  shares?: HybridShares;
}

/** The process's embedder (one model session, shared by workers and lens). */
export async function createEmbedder(
  kind: EmbedderKind,
  opts: EmbedderOptions = {},
): Promise<Embedder> {
  const { modelPath, shares, precision, ...session } = opts;
  switch (kind) {
    case 'descriptor':
      return new DescriptorEmbedder();
    case 'onnx':
      return OnnxEmbedder.load(modelPath!, session);
    case 'efficientnet':
      return EfficientNetEmbedder.load({ ...session, precision });
    case 'hybrid': {
      const s = shares ?? HYBRID_SHARES;
      const w = hybridWeights(s);
      // The int8 variant's vectors are new anyway, so it also takes the cheaper resample for
      // the descriptor's input; the float variant keeps the vectors its id stands for.
      return new HybridEmbedder(
        hybridId(s, precision),
        [
          { embedder: new DescriptorEmbedder(w.descriptor), weight: w.parts.descriptor },
          {
            embedder: await EfficientNetEmbedder.load({ ...session, precision }),
            weight: w.parts.efficientnet,
          },
        ],
        precision === 'int8' ? 'area' : 'lanczos',
      );
    }
  }
}
