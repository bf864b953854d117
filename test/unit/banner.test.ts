/** The start-up banner (contract §12): what runs, where, and every setting given but ignored. */
import { startupBanner } from '../../src/app/banner';
import { loadConfig } from '../../src/config/env';

const embedder = { id: 'descriptor-v1', dimensions: 140 };

test('an embedded process names its engine, queue, embedder, roles and address, and the stray ELASTICSEARCH_URL', () => {
  const config = loadConfig({ DATA_DIR: '/srv/vss', ELASTICSEARCH_URL: 'http://es:9200' });
  const text = startupBanner(config, {
    url: 'http://localhost:8080',
    healthUrl: 'http://localhost:8080',
    embedder,
  }).join('\n');
  expect(text).toMatch(
    /^visual-search-service listening on http:\/\/localhost:8080 \(roles: api, worker\)$/m,
  );
  expect(text).toMatch(/^ {2}engine: {2}embedded \(data in \/srv\/vss\)$/m);
  expect(text).toMatch(/^ {2}queue: {3}in-process$/m);
  expect(text).toMatch(/^ {2}embedder: descriptor-v1 \(140 dimensions\)$/m);
  expect(text.match(/^ {2}ignored: .*$/gm)).toEqual([
    '  ignored: ELASTICSEARCH_URL (SEARCH_BACKEND=embedded does not use Elasticsearch)',
  ]);
});

test('a worker-only process names what it ignores, but not the rate limit its /metrics uses', () => {
  const config = loadConfig({
    APP_ROLES: 'worker',
    SEARCH_BACKEND: 'elasticsearch',
    ELASTICSEARCH_URL: 'http://elastic:s3cret@es:9200',
    QUEUE: 'rabbitmq',
    AMQP_URL: 'amqp://vss:s3cret@mq:5672',
    PUBLIC_BASE_URL: 'https://search.example.com',
    RATE_LIMIT_PER_MINUTE: '600',
    WORKER_CONCURRENCY: '8',
  });
  const text = startupBanner(config, { healthUrl: 'http://10.0.0.5:8080', embedder }).join('\n');
  expect(text).toMatch(/^visual-search-service worker running \(roles: worker\)$/m);
  expect(text).toMatch(/^ {2}health: {2}http:\/\/10\.0\.0\.5:8080\/healthz$/m);
  expect(text).toMatch(/^ {2}engine: {2}elasticsearch \(http:\/\/\*\*\*@es:9200\/?, indices /m);
  expect(text).toMatch(/^ {2}queue: {3}rabbitmq \(amqp:\/\/\*\*\*@mq:5672, queues /m);
  expect(text).toMatch(/^ {2}embedder: descriptor-v1 \(140 dimensions\)$/m);
  expect(text).not.toMatch(/s3cret|listening on|GraphQL|Operator token/);
  // the worker's ops server throttles failed logins to /metrics with RATE_LIMIT_PER_MINUTE
  expect(text.match(/^ {2}ignored: .*$/gm)).toEqual([
    '  ignored: PUBLIC_BASE_URL (this process serves no API)',
  ]);
});
