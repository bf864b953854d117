import { errors } from '@elastic/elasticsearch';
import Fastify from 'fastify';
import pino from 'pino';
import { toUnavailable } from '../../src/adapters/elasticsearch/outage';
import { sendError } from '../../src/api/http/errors';

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
  const { sqliteOutage } = await import('../../src/adapters/embedded/db');
  const busy = Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
  const e = sqliteOutage(busy)!;
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

describe('GraphQL', () => {
  const lines: string[] = [];
  let app: Awaited<ReturnType<typeof import('../../src/app/start').startApp>>;
  beforeAll(async () => {
    const { startApp } = await import('../../src/app/start');
    const { loadConfig } = await import('../../src/config/env');
    const { OPERATOR, tempDir } = await import('../helpers/app');
    app = await startApp(
      loadConfig({
        PORT: '0',
        HOST: '127.0.0.1',
        DATA_DIR: tempDir(),
        OPERATOR_TOKEN: OPERATOR,
        EMBEDDER: 'descriptor',
      }),
      { log: pino({ level: 'info' }, { write: (l: string) => void lines.push(l) }) },
    );
  });
  afterAll(() => app.stop());

  /** Runs `{ viewer { kind } }` with `failure` thrown where the resolver asks the service. */
  async function failWith(failure: Error, requestId: string) {
    const { OPERATOR } = await import('../helpers/app');
    jest.spyOn(app.container.services.auth, 'describe').mockRejectedValueOnce(failure);
    lines.length = 0;
    const r = await fetch(`${app.url}/graphql`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        authorization: `token ${OPERATOR}`,
        'x-request-id': requestId,
      },
      body: JSON.stringify({ query: '{ viewer { kind } }' }),
    });
    expect(r.headers.get('x-request-id')).toBe(requestId);
    const text = await r.text();
    const logged = lines.map((l) => JSON.parse(l) as Record<string, any>).filter((l) => l.err);
    return { text, body: JSON.parse(text) as { errors: any[] }, logged };
  }

  test('an unavailable store is logged once with the request id and its cause, never answered', async () => {
    const below = Object.assign(new Error('connect ECONNREFUSED 10.0.0.7:9200'), {
      code: 'ECONNREFUSED',
    });
    const { AppError } = await import('../../src/domain/errors');
    const r = await failWith(
      new AppError('unavailable', 'the store is unreachable', undefined, 5, { cause: below }),
      'gql-req-503',
    );
    expect(r.body.errors[0].extensions).toMatchObject({
      code: 'unavailable',
      request_id: 'gql-req-503',
    });
    expect(r.text).not.toMatch(/ECONNREFUSED|10\.0\.0\.7/);
    expect(r.logged).toHaveLength(1);
    expect(r.logged[0]).toMatchObject({ level: 40, reqId: 'gql-req-503' });
    expect(r.logged[0]!.err.message).toMatch(/unreachable.*ECONNREFUSED 10\.0\.0\.7:9200/s);
  });

  test('an unexpected error is logged once with the request id, answered as internal', async () => {
    const r = await failWith(new Error('secret backend detail'), 'gql-req-500');
    expect(r.body.errors[0].extensions).toMatchObject({
      code: 'internal',
      request_id: 'gql-req-500',
    });
    expect(r.text).not.toMatch(/secret backend detail/);
    expect(r.logged).toHaveLength(1);
    expect(r.logged[0]).toMatchObject({ level: 50, reqId: 'gql-req-500' });
    expect(r.logged[0]!.err.message).toBe('secret backend detail');
  });
});
