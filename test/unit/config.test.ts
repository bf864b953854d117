import { ConfigError, loadConfig } from '../../src/config/env';

const problems = (env: Record<string, string>): string[] => {
  try {
    loadConfig(env);
    return [];
  } catch (e) {
    if (e instanceof ConfigError) return e.problems;
    throw e;
  }
};

test('Elasticsearch index layout defaults to one shard and one replica, and is validated', () => {
  const c = loadConfig({});
  expect([c.ELASTICSEARCH_SHARDS, c.ELASTICSEARCH_REPLICAS]).toEqual([1, 1]);
  const set = loadConfig({ ELASTICSEARCH_SHARDS: '3', ELASTICSEARCH_REPLICAS: '0' });
  expect([set.ELASTICSEARCH_SHARDS, set.ELASTICSEARCH_REPLICAS]).toEqual([3, 0]);
  const bad = problems({ ELASTICSEARCH_SHARDS: '0', ELASTICSEARCH_REPLICAS: 'two' });
  expect(bad).toEqual([
    expect.stringMatching(/^ELASTICSEARCH_SHARDS="0": /),
    expect.stringMatching(/^ELASTICSEARCH_REPLICAS="two": expected a number/),
  ]);
});

test('ELASTICSEARCH_URL takes one node or a comma list of the nodes of one cluster', () => {
  expect(loadConfig({}).ELASTICSEARCH_URL).toEqual(['http://127.0.0.1:9200']);
  expect(
    loadConfig({ ELASTICSEARCH_URL: 'http://es1:9200, http://es2:9200' }).ELASTICSEARCH_URL,
  ).toEqual(['http://es1:9200', 'http://es2:9200']);
  expect(problems({ ELASTICSEARCH_URL: 'http://es1:9200,es2' })).toEqual([
    expect.stringMatching(/^ELASTICSEARCH_URL=.*comma-separated list/),
  ]);
});

test('the Elasticsearch engine needs a shared queue: jobs in a DATA_DIR file would be one host’s', () => {
  expect(problems({ SEARCH_BACKEND: 'elasticsearch' })).toEqual([
    expect.stringMatching(/^QUEUE=inprocess: .*set QUEUE=rabbitmq/),
  ]);
  expect(problems({ SEARCH_BACKEND: 'elasticsearch', QUEUE: 'rabbitmq' })).toEqual([]);
  expect(problems({ QUEUE: 'rabbitmq' })).toEqual([]);
});

test('settings the configuration does not use are named, with the reason (contract §12)', () => {
  expect(
    loadConfig({
      ELASTICSEARCH_URL: 'http://es:9200',
      AMQP_URL: 'amqp://mq',
      EMBEDDER: 'descriptor',
      EMBEDDER_THREADS: '2',
      APP_ROLES: 'api',
      WORKER_CONCURRENCY: '8',
    }).ignored,
  ).toEqual([
    'ELASTICSEARCH_URL (SEARCH_BACKEND=embedded does not use Elasticsearch)',
    'AMQP_URL (QUEUE=inprocess does not use RabbitMQ)',
    'EMBEDDER_THREADS (EMBEDDER=descriptor runs no model session)',
    'WORKER_CONCURRENCY (this process runs no worker)',
  ]);
  expect(
    loadConfig({
      SEARCH_BACKEND: 'elasticsearch',
      QUEUE: 'rabbitmq',
      DATA_DIR: '/data',
      ELASTICSEARCH_URL: 'http://es:9200',
    }).ignored,
  ).toEqual(['DATA_DIR (with SEARCH_BACKEND=elasticsearch every piece of state is shared)']);
  expect(loadConfig({}).ignored).toEqual([]);
});

test('IMAGE_FETCH_ALLOW_HOSTS takes exact host:port entries, normalised like URLs', () => {
  expect(loadConfig({}).IMAGE_FETCH_ALLOW_HOSTS).toEqual([]);
  expect(
    loadConfig({ IMAGE_FETCH_ALLOW_HOSTS: ' 127.0.0.1:5123 ,, LocalHost:5123,[::1]:80' })
      .IMAGE_FETCH_ALLOW_HOSTS,
  ).toEqual([
    { host: '127.0.0.1', port: 5123 },
    { host: 'localhost', port: 5123 },
    { host: '::1', port: 80 },
  ]);
  for (const bad of [
    'localhost', // no port: every port would be open
    '127.0.0.1:0',
    '127.0.0.1:65536',
    '*:5123',
    '10.0.0.0/8:80',
    'http://localhost:5123',
    'localhost:5123/img',
    '::1:5123', // IPv6 needs brackets
    'user@localhost:5123',
    'localhost:*',
  ])
    expect(problems({ IMAGE_FETCH_ALLOW_HOSTS: `127.0.0.1:5123,${bad}` })).toEqual([
      `IMAGE_FETCH_ALLOW_HOSTS=${JSON.stringify(`127.0.0.1:5123,${bad}`)}: expected a comma list of exact host:port entries (e.g. 127.0.0.1:5123, localhost:5123, [::1]:5123); not ${JSON.stringify(bad)}`,
    ]);
  expect(
    loadConfig({ IMAGE_FETCH_ALLOW_PRIVATE: 'true', IMAGE_FETCH_ALLOW_HOSTS: 'localhost:5123' })
      .ignored,
  ).toEqual(['IMAGE_FETCH_ALLOW_HOSTS (IMAGE_FETCH_ALLOW_PRIVATE=true allows every address)']);
});

test('EMBEDDER_BATCH: images per model run, 1–64; the model settings count with onnx too', () => {
  expect(loadConfig({}).EMBEDDER_BATCH).toBeUndefined();
  expect(loadConfig({ EMBEDDER_BATCH: '1' }).EMBEDDER_BATCH).toBe(1);
  expect(problems({ EMBEDDER_BATCH: '0', EMBEDDER_THREADS: 'all' })).toEqual([
    expect.stringMatching(/^EMBEDDER_THREADS="all": expected a number/),
    expect.stringMatching(/^EMBEDDER_BATCH="0": /),
  ]);
  expect(problems({ EMBEDDER_BATCH: '65' })).toEqual([expect.stringMatching(/^EMBEDDER_BATCH=/)]);
  // the generic ONNX embedder runs on the same session: its threads and batch are used
  expect(
    loadConfig({
      EMBEDDER: 'onnx',
      EMBEDDER_MODEL_PATH: '/m.onnx',
      EMBEDDER_THREADS: '2',
      EMBEDDER_BATCH: '4',
    }).ignored,
  ).toEqual([]);
  expect(loadConfig({ EMBEDDER: 'descriptor', EMBEDDER_BATCH: '4' }).ignored).toEqual([
    'EMBEDDER_BATCH (EMBEDDER=descriptor runs no model session)',
  ]);
});
