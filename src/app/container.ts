import { Client } from '@elastic/elasticsearch';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import pino, { type Logger } from 'pino';
import { EmbeddedAccountStore } from '../adapters/embedded/account-store';
import { EmbeddedContentStore } from '../adapters/embedded/content-store';
import { openDb } from '../adapters/embedded/db';
import { EmbeddedSearchEngine } from '../adapters/embedded/search-engine';
import { SqliteUsageLedger } from '../adapters/embedded/usage-ledger';
import { ElasticsearchStore } from '../adapters/elasticsearch/es-store';
import { DescriptorEmbedder } from '../adapters/embedders/descriptor';
import { OnnxEmbedder } from '../adapters/embedders/onnx';
import { allowAll, publicOnly } from '../adapters/images/address-policy';
import { HttpImageFetcher } from '../adapters/images/http-fetcher';
import { SharpImageAnalyzer } from '../adapters/images/sharp-analyzer';
import { AmqpJobQueue } from '../adapters/queue/rabbitmq/amqp-queue';
import { SqliteJobQueue } from '../adapters/queue/in-process/sqlite-queue';
import type { Config } from '../config/env';
import { ProcessImageHandler } from '../jobs/process-image';
import type { AccountStore } from '../ports/account-store';
import type { ContentStore } from '../ports/content-store';
import type { Embedder } from '../ports/embedder';
import type { EmbedderRef } from '../domain/dataset';
import type { JobQueue } from '../ports/job-queue';
import type { SearchEngine } from '../ports/search-engine';
import type { UsageLedger } from '../ports/usage-ledger';
import { AuthService } from '../services/auth';
import { ContentService } from '../services/content';
import { DatasetService } from '../services/datasets';
import { OrganisationService } from '../services/organisations';
import { issueToken } from '../services/tokens';
import { MeteringService } from '../services/metering';
import { SimilarityService } from '../services/similarity';
import { UsageService } from '../services/usage';
import { VisionService } from '../services/vision';

export interface Container {
  config: Config;
  log: Logger;
  accounts: AccountStore;
  content: ContentStore;
  engine: SearchEngine;
  queue: JobQueue;
  auth: AuthService;
  organisations: OrganisationService;
  datasets: DatasetService;
  contentService: ContentService;
  vision: VisionService;
  similarity: SimilarityService;
  usage: UsageService;
  ledger: UsageLedger;
  processImage: ProcessImageHandler;
  /** The embedder this process embeds with (images and lens queries). */
  embedder: EmbedderRef;
  /** Set on first start when no OPERATOR_TOKEN is configured; printed once, stored as a hash. */
  bootstrapOperatorToken?: string;
  close(): Promise<void>;
}

/** The server key derives browse tokens; it lives beside the data, outside the database. */
function loadServerKey(dataDir: string): Buffer {
  const file = path.join(dataDir, 'server.key');
  if (!fs.existsSync(file)) {
    fs.mkdirSync(dataDir, { recursive: true });
    fs.writeFileSync(file, crypto.randomBytes(32).toString('hex'), { mode: 0o600, flag: 'wx' });
  }
  return Buffer.from(fs.readFileSync(file, 'utf8').trim(), 'hex');
}

async function openQueue(config: Config, log: Logger, now: () => number): Promise<JobQueue> {
  if (config.QUEUE === 'inprocess')
    return new SqliteJobQueue(
      path.join(config.dataDir, 'queue.db'),
      log,
      now,
      config.RETRY_BASE_MS,
    );
  const queue = new AmqpJobQueue(
    config.AMQP_URL,
    config.AMQP_QUEUE_PREFIX,
    log,
    config.RETRY_BASE_MS,
  );
  try {
    await queue.start();
  } catch (e) {
    throw new Error(
      `cannot reach RabbitMQ at AMQP_URL (${redact(config.AMQP_URL)}): ${(e as Error).message}`,
      { cause: e },
    );
  }
  return queue;
}

/** Keeps credentials out of start-up errors and logs. */
function redact(url: string): string {
  return url.replace(/\/\/[^@/]*@/, '//***@');
}

export async function buildContainer(
  config: Config,
  opts: { log?: Logger; now?: () => number } = {},
): Promise<Container> {
  const log = opts.log ?? pino({ level: config.LOG_LEVEL });
  const now = opts.now ?? Date.now;
  const clock = (): Date => new Date(now());

  const embedder: Embedder =
    config.EMBEDDER === 'onnx'
      ? await OnnxEmbedder.load(config.EMBEDDER_MODEL_PATH!)
      : new DescriptorEmbedder();
  const embedderRef = { id: embedder.id, dimensions: embedder.dimensions };
  const db = openDb(path.join(config.dataDir, 'store.db'));
  const accounts = new EmbeddedAccountStore(db);
  let content: ContentStore;
  let engine: SearchEngine;
  let es: Client | undefined;
  if (config.SEARCH_BACKEND === 'elasticsearch') {
    es = new Client({ node: config.ELASTICSEARCH_URL, requestTimeout: 30_000, maxRetries: 2 });
    const store = new ElasticsearchStore(es, config.ES_INDEX_PREFIX, now, embedder.dimensions);
    content = store;
    engine = store;
  } else {
    content = new EmbeddedContentStore(db);
    engine = new EmbeddedSearchEngine(db);
  }
  const queue = await openQueue(config, log.child({ component: 'queue' }), now);
  const analyzer = new SharpImageAnalyzer(embedder);
  const fetcher = new HttpImageFetcher(config.IMAGE_FETCH_ALLOW_PRIVATE ? allowAll : publicOnly);

  const auth = new AuthService(accounts, config.OPERATOR_TOKEN);
  let bootstrapOperatorToken: string | undefined;
  // Only a process that serves the API can show the token to anyone.
  if (
    config.APP_ROLES.has('api') &&
    !config.OPERATOR_TOKEN &&
    !(await accounts.getMeta('operator_token_prefix'))
  ) {
    const { token, record } = issueToken('op', {}, clock());
    await accounts.putToken(record);
    await accounts.setMeta('operator_token_prefix', record.prefix);
    bootstrapOperatorToken = token;
  }
  const serverKey = loadServerKey(config.dataDir);
  const ledger = new SqliteUsageLedger(db);
  const metering = new MeteringService(accounts, ledger, now);
  const vision = new VisionService(content, engine, auth, metering);

  return {
    config,
    log,
    accounts,
    content,
    engine,
    queue,
    auth,
    organisations: new OrganisationService(accounts, auth, clock),
    datasets: new DatasetService(accounts, content, auth, serverKey, clock, embedderRef),
    contentService: new ContentService(
      content,
      queue,
      auth,
      log.child({ component: 'content' }),
      now,
    ),
    vision,
    similarity: new SimilarityService(
      content,
      engine,
      auth,
      vision,
      metering,
      analyzer,
      embedder.id,
    ),
    usage: new UsageService(accounts, content, auth, ledger, clock),
    ledger,
    processImage: new ProcessImageHandler(
      content,
      accounts,
      ledger,
      fetcher,
      analyzer,
      log.child({ component: 'worker' }),
      now,
      config.RETRY_BASE_MS,
      embedder.id,
    ),
    embedder: embedderRef,
    bootstrapOperatorToken,
    async close() {
      await queue.close();
      await fetcher.close();
      await es?.close();
      db.close();
    },
  };
}
