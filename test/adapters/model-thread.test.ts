import { EfficientNetEmbedder } from '../../src/adapters/embedders/efficientnet';

/**
 * onnxruntime-node's run is synchronous under its promise: on the main thread each image held
 * the event loop (and every HTTP request of the process) for the whole inference. The model
 * runs on a thread of its own.
 */
test('the model runs on its own thread: the event loop keeps turning during inference', async () => {
  const model = await EfficientNetEmbedder.load({ threads: 1 });
  try {
    const pixels = () => ({ data: new Uint8Array(224 * 224 * 3).fill(128), size: 224 });
    await model.embed(pixels()); // warm-up
    const runs = 6;
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 1);
    await Promise.all(Array.from({ length: runs }, () => model.embed(pixels())));
    clearInterval(ticker);
    // On the main thread the loop turned once between runs at most (onnxruntime-node's
    // setImmediate): a timer could fire about once a run. A run takes 10–60 ms here.
    expect(ticks).toBeGreaterThan(3 * runs);
  } finally {
    await model.close();
  }
});

test('a closed model refuses runs instead of hanging them', async () => {
  const model = await EfficientNetEmbedder.load({ threads: 1 });
  await model.close();
  await expect(model.embed({ data: new Uint8Array(224 * 224 * 3), size: 224 })).rejects.toThrow(
    /thread ended/,
  );
});
