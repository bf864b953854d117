/**
 * With no broker to reach, a worker's publish still resolves: the notices are counted as
 * dropped (subscribers' absolute counts heal the gap), never an error in the job.
 */
import net from 'node:net';
import pino from 'pino';
import { AmqpEventBus } from '../../src/adapters/queue/rabbitmq/amqp-event-bus';

test('publishing without a reachable broker resolves and counts the drop', async () => {
  // a port that refuses connections: bound and closed again
  const port = await new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
  const bus = new AmqpEventBus(
    `amqp://guest:guest@127.0.0.1:${port}`,
    'test.drop.',
    pino({ level: 'silent' }),
  );
  const notice = {
    org: 'acme',
    datasetId: 'ds',
    type: 'items.processed' as const,
    itemIds: ['a', 'b'],
    at: Date.now(),
  };
  await expect(bus.publish([notice, notice])).resolves.toBeUndefined();
  expect(bus.dropped).toBe(2);
  await bus.close();
});
