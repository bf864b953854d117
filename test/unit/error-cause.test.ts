import { errors } from '@elastic/elasticsearch';
import Fastify from 'fastify';
import pino from 'pino';
import { toUnavailable } from '../../src/adapters/elasticsearch/guard';
import { sendError } from '../../src/api/rest/errors';

test('a wrapped store error keeps its cause in the log and never in the answer', async () => {
  const lines: string[] = [];
  const log = pino({ level: 'info' }, { write: (l: string) => void lines.push(l) });
  const app = Fastify({ loggerInstance: log });
  app.setErrorHandler((err, req, reply) => sendError(req, reply, err));
  const below = new errors.ConnectionError('connect ECONNREFUSED 10.0.0.7:9200');
  app.get('/x', async () => {
    throw toUnavailable(below);
  });
  const address = await app.listen({ port: 0, host: '127.0.0.1' });
  const r = await fetch(`${address}/x`);
  expect(r.status).toBe(503);
  expect(await r.text()).not.toMatch(/ECONNREFUSED|10\.0\.0\.7/);
  const logged = lines.map((l) => JSON.parse(l) as Record<string, any>).find((l) => l.err);
  expect(logged).toMatchObject({ level: 40, reqId: expect.any(String) });
  expect(logged!.err.message).toMatch(/unreachable.*ECONNREFUSED 10\.0\.0\.7:9200/s);
  await app.close();
});

test('the embedded store keeps the cause of an unavailable database too', async () => {
  const { guarded } = await import('../../src/adapters/embedded/db');
  const busy = Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
  const e = await guarded(() => {
    throw busy;
  }).catch((x: unknown) => x as Error & { code?: string; cause?: unknown });
  expect(e).toMatchObject({ code: 'unavailable' });
  expect(e.message).not.toMatch(/locked/);
  expect(e.cause).toBe(busy);
});

test('an unreachable broker keeps the connect error as the cause of its 503', async () => {
  const { AmqpJobQueue } = await import('../../src/adapters/queue/rabbitmq/amqp-queue');
  const { freePort } = await import('../helpers/app');
  // nothing listens there: every connect is refused until the 5 s wait for the broker ends
  const q = new AmqpJobQueue(
    `amqp://127.0.0.1:${await freePort()}`,
    'test.',
    pino({ level: 'silent' }),
  );
  const e = await q
    .enqueue([{ datasetId: 'd', itemId: 'i', url: 'http://img.test/1.png', attempt: 1 }])
    .then(
      () => undefined,
      (x: unknown) => x as Error & { code?: string; cause?: unknown },
    );
  await q.close();
  expect(e).toMatchObject({ code: 'unavailable', message: expect.stringMatching(/unreachable/) });
  expect(String((e?.cause as Error | undefined)?.message)).toMatch(/ECONNREFUSED/);
}, 20_000);
