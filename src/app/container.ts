import { ReadinessMemo } from '../services/ready-memo';
import { esClient } from '../adapters/elasticsearch/client';
import crypto from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import pino, { type Logger } from 'pino';
import { openDb, sqliteOutage } from '../adapters/embedded/db';
import { embeddedPorts } from '../adapters/embedded/embedded-ports';
import type { EnginePorts } from '../adapters/engine-ports';
import { esPorts } from '../adapters/elasticsearch/es-ports';
import { EsIndices } from '../adapters/elasticsearch/indices';
import { withPolicy } from '../adapters/port-policy';
import { createEmbedder } from '../adapters/embedders';
import { allowAll, allowListed } from '../adapters/images/address-policy';
import { HttpImageFetcher } from '../adapters/images/http-fetcher';
import { SharpImageAnalyzer } from '../adapters/images/sharp-analyzer';
import { AmqpJobQueue } from '../adapters/queue/rabbitmq/amqp-queue';
import { SqliteJobQueue } from '../adapters/queue/in-process/sqlite-queue';
import { AmqpEventBus } from '../adapters/queue/rabbitmq/amqp-event-bus';
import { SqliteEventBus } from '../adapters/queue/in-process/sqlite-event-bus';
import type { EventBus } from '../ports/event-bus';
import { ProgressNotices } from '../jobs/progress-notices';
import { DatasetEventsService } from '../services/dataset-events';
import { redactUrl, type Config } from '../config/env';
import { FairShare } from '../jobs/fair-share';
import { Slots } from '../lib/slots';
import { ProcessImageHandler } from '../jobs/process-image';
import type { Embedder } from '../ports/embedder';
import type { ImageFetcher } from '../ports/image-fetcher';
import { Metrics } from '../observability/metrics';
import type { EmbedderRef } from '../domain/dataset';
import { contentParts } from '../ports/content-store';
import type { JobQueue } from '../ports/job-queue';
import { AuthService } from '../services/auth';
import { ContentService } from '../services/content';
import { DatasetService } from '../services/datasets';
import { OrganisationService } from '../services/organisations';
import { PlanReads } from '../services/plans';
import { MeteringService } from '../services/metering';
import { SimilarityService } from '../services/similarity';
import { UsageService } from '../services/usage';
import { ReportService } from '../services/report';
import { TrackService } from '../services/track';
import { VisionService } from '../services/vision';
import { ReadinessService } from '../services/readiness';
import type { ServiceSet } from '../services/service-set';
import { datasetPath } from '../api/links';
import { HttpWebhookSender } from '../adapters/webhooks/http-sender';
import { allSinks } from '../jobs/item-outcomes';
import { DuplicatePass, startDuplicatePass } from '../jobs/duplicate-pass';
import { TuningPass, startTuningPass } from '../jobs/tuning-pass';
import { TunedModels, activeProjections } from '../services/tuned-models';
import { DuplicateService } from '../services/duplicates';
import { OutboxBatcher } from '../jobs/outbox-batcher';
import { WebhookDeliverer } from '../jobs/webhook-deliverer';
import { WebhookFacts } from '../jobs/webhook-facts';
import { startWebhookWork } from '../jobs/webhook-work';
import { PublicationWatch } from '../services/publication-watch';
import { UsageThresholds } from '../services/usage-thresholds';
import { WebhookDirectory } from '../services/webhook-directory';
import { webhookHeaders, webhookSecret } from '../services/webhook-signing';
import { WebhookService } from '../services/webhooks';

/** Every port with state, as one engine provides them. */
export interface Stores extends EnginePorts {
  close(): Promise<void>;
}

/** The use cases, for the transports: each takes the part it declares (RestServices, …). */
export type Services = ServiceSet;

export interface Container {
  config: Config;
  log: Logger;
  services: Services;
  /** The ports, for the worker role and start-up in app/ (and tests); never for a transport. */
  ports: Omit<Stores, 'close'> & { queue: JobQueue; bus: EventBus };
  processImage: ProcessImageHandler;
  /** The embedder this process embeds with (images and lens queries). */
  embedder: EmbedderRef;
  /** The worker role's share of events out: batching facts and attempting deliveries. */
  startWebhookWork(): { stop(): Promise<void> };
  /** The worker role's share of the near-duplicate report (contract §18). */
  startDuplicatePass(): { stop(): Promise<void> };
  /** The worker role's share of tuned similarity: fits and stored projections (contract §20). */
  startTuningPass(): { stop(): Promise<void> };
  /** Set on first start when no OPERATOR_TOKEN is configured; printed once, stored as a hash. */
  bootstrapOperatorToken?: string;
  close(): Promise<void>;
}

/** Image bytes downloaded, counted for image_fetch_bytes_total. */
function countBytes(fetcher: ImageFetcher, metrics: Metrics): ImageFetcher {
  return {
    async fetch(url) {
      const bytes = await fetcher.fetch(url);
      metrics.fetchedBytes.inc(bytes.length);
      return bytes;
    },
  };
}

/** Which adapter serves each port (start-up banner, and the test that nothing falls back). */
export function describePorts(c: Container): Record<string, string> {
  const { accounts, content, engine, ledger, events, keys, rates, webhooks, outbox, queue, bus } =
    c.ports;
  const items = contentParts(content);
  const ports = {
    accounts,
    itemReader: items?.reader,
    itemWriter: items?.writer,
    itemProcessing: items?.processing,
    engine,
    ledger,
    events,
    keys,
    rates,
    webhooks,
    outbox,
    queue,
    bus,
  };
  return Object.fromEntries(
    Object.entries(ports).map(([k, v]) => [k, v ? (v as object).constructor.name : 'none']),
  );
}

/** One SQLite file (and the server key beside it) under DATA_DIR: one machine, no services. */
function embeddedStores(config: Config, metrics: Metrics): Stores {
  const db = openDb(path.join(config.dataDir, 'store.db'));
  return {
    ...embeddedPorts(db, config.dataDir, metrics),
    close: async () => {
      db.close();
    },
  };
}

/**
 * Everything in Elasticsearch (contract §12): no file, no process-local state another host
 * would need, so any number of processes behave as one service.
 */
async function elasticsearchStores(
  config: Config,
  embedder: Embedder,
  now: () => number,
  metrics: Metrics,
): Promise<Stores> {
  const client = esClient(config.ELASTICSEARCH_URL);
  const indices = new EsIndices(client, config.ES_INDEX_PREFIX, {
    shards: config.ELASTICSEARCH_SHARDS,
    replicas: config.ELASTICSEARCH_REPLICAS,
  });
  try {
    await indices.ensureShared();
    await indices.ensureItemTemplate(embedder.dimensions);
  } catch (e) {
    await client.close();
    throw new Error(
      `cannot prepare the Elasticsearch indices at ELASTICSEARCH_URL (${config.ELASTICSEARCH_URL.map(redactUrl).join(', ')}): ${(e as Error).message}`,
      { cause: e },
    );
  }
  return {
    ...esPorts(indices, { vectorDims: embedder.dimensions, now }, metrics),
    close: () => client.close(),
  };
}

/** Live progress notices travel the way jobs do: through RabbitMQ, or the queue's SQLite file. */
function openEventBus(config: Config, log: Logger, now: () => number): EventBus {
  return config.QUEUE === 'rabbitmq'
    ? new AmqpEventBus(config.AMQP_URL, config.AMQP_QUEUE_PREFIX, log)
    : new SqliteEventBus(path.join(config.dataDir, 'queue.db'), log, now);
}

async function openQueue(
  config: Config,
  log: Logger,
  now: () => number,
  metrics: Metrics,
): Promise<JobQueue> {
  if (config.QUEUE === 'inprocess')
    return withPolicy(
      new SqliteJobQueue(path.join(config.dataDir, 'queue.db'), log, now, config.RETRY_BASE_MS),
      { classify: sqliteOutage, time: metrics.portTimer('queue') },
    );
  const queue = new AmqpJobQueue(
    config.AMQP_URL,
    config.AMQP_QUEUE_PREFIX,
    log,
    config.RETRY_BASE_MS,
    now,
  );
  try {
    await queue.start();
  } catch (e) {
    throw new Error(
      `cannot reach RabbitMQ at AMQP_URL (${redactUrl(config.AMQP_URL)}): ${(e as Error).message}`,
      { cause: e },
    );
  }
  // The queue words its own outages (AppError 'unavailable'): only timed here.
  return withPolicy(queue, { classify: () => undefined, time: metrics.portTimer('queue') });
}

export async function buildContainer(
  config: Config,
  opts: { log?: Logger; now?: () => number } = {},
): Promise<Container> {
  const log = opts.log ?? pino({ level: config.LOG_LEVEL });
  const now = opts.now ?? Date.now;
  const clock = (): Date => new Date(now());

  const metrics = new Metrics();
  const embedder: Embedder = await createEmbedder(config.EMBEDDER, {
    modelPath: config.EMBEDDER_MODEL_PATH,
    precision: config.EMBEDDER_PRECISION,
    threads: config.EMBEDDER_THREADS,
    maxBatch: config.EMBEDDER_BATCH,
    onRun: (images) => metrics.embedderRunImages.observe(images),
    onWarning: (message) => log.warn({ component: 'embedder' }, message),
  });
  const embedderRef = { id: embedder.id, dimensions: embedder.dimensions };
  const stores =
    config.SEARCH_BACKEND === 'elasticsearch'
      ? await elasticsearchStores(config, embedder, now, metrics)
      : embeddedStores(config, metrics);
  // every port but close, as the worker role and start-up see them (Container.ports)
  const { close: _close, ...enginePorts } = stores;
  const {
    accounts,
    content,
    engine,
    ledger,
    events,
    keys,
    rates,
    webhooks,
    outbox,
    duplicates,
    tuning,
  } = enginePorts;
  let queue: JobQueue;
  try {
    queue = await openQueue(config, log.child({ component: 'queue' }), now, metrics);
  } catch (e) {
    await stores.close();
    throw e;
  }
  // Live progress (contract §17 subscriptions): workers publish, API processes stream.
  const bus = openEventBus(config, log.child({ component: 'event-bus' }), now);
  const progressNotices = new ProgressNotices(bus, log.child({ component: 'progress' }), now);
  const analyzer = new SharpImageAnalyzer(embedder);
  metrics.watchQueue(queue, config.APP_ROLES.has('worker'), now);
  // Webhook URLs obey the image-fetch address rules (contract §17): one policy for both.
  const addressPolicy = config.IMAGE_FETCH_ALLOW_PRIVATE
    ? allowAll
    : allowListed(config.IMAGE_FETCH_ALLOW_HOSTS);
  const http = new HttpImageFetcher(addressPolicy);
  const sender = new HttpWebhookSender(addressPolicy);
  const fetcher = countBytes(http, metrics);

  const serverKey = await keys.serverKey();
  const auth = new AuthService(accounts, config.OPERATOR_TOKEN, serverKey, now);
  // Only a process that serves the API can show a generated token to anyone.
  const bootstrapOperatorToken = config.APP_ROLES.has('api')
    ? await auth.ensureOperatorToken(clock())
    : undefined;
  const plans = new PlanReads(accounts, now);
  const webhookLog = log.child({ component: 'webhooks' });
  const directory = new WebhookDirectory(webhooks, now);
  const thresholds = new UsageThresholds(directory, outbox, ledger, plans, now, webhookLog);
  const publications = new PublicationWatch(
    directory,
    outbox,
    (id) => content.counts(id),
    webhookLog,
  );
  metrics.watchOutbox(outbox, now);
  const metering = new MeteringService(
    plans,
    ledger,
    events,
    log.child({ component: 'metering' }),
    now,
    thresholds,
  );
  const readyMemo = new ReadinessMemo(now);
  const settingsAt = (org: string, name: string) => `${datasetPath(org, name)}/settings/fields`;
  const vision = new VisionService(
    content,
    engine,
    auth,
    metering,
    settingsAt,
    rates,
    readyMemo,
    now,
  );
  const tunedModels = new TunedModels(tuning);
  const services: Services = {
    auth,
    organisations: new OrganisationService(accounts, auth, clock),
    datasets: new DatasetService(
      accounts,
      content,
      auth,
      serverKey,
      clock,
      embedderRef,
      // a deleted dataset's duplicate report and fitted projections go with it
      {
        dropDataset: async (id) => {
          await duplicates.dropDataset(id);
          await tuning.pruneModels(id, []);
        },
      },
      settingsAt,
    ),
    content: new ContentService(
      content,
      queue,
      auth,
      log.child({ component: 'content' }),
      now,
      readyMemo,
      (org, id) => publications.changed(org, id),
    ),
    datasetEvents: new DatasetEventsService(auth, (id) => content.counts(id), bus, {
      // Elasticsearch shows a write after its 1-s refresh; the embedded engine at once.
      visibilityLagMs: config.SEARCH_BACKEND === 'elasticsearch' ? 1100 : 0,
      log: log.child({ component: 'dataset-events' }),
      now,
    }),
    vision,
    track: new TrackService(vision, events, now),
    report: new ReportService(auth, events, now),
    duplicates: new DuplicateService(auth, content, duplicates),
    similarity: new SimilarityService(vision, analyzer, embedder.id, tunedModels),
    usage: new UsageService(accounts, content, auth, ledger, clock),
    metering,
    readiness: new ReadinessService({ accounts, store: content, queue }),
    metrics,
    webhooks: new WebhookService(
      auth,
      accounts,
      webhooks,
      outbox,
      sender,
      directory,
      serverKey,
      now,
    ),
  };
  // Whoever holds a lease or a claim: this process, unique across restarts and hosts.
  const owner = `${os.hostname()}:${process.pid}:${crypto.randomBytes(4).toString('hex')}`;
  const outcomes = allSinks([
    progressNotices,
    new WebhookFacts(outbox, directory),
    {
      // a processed image may cross a fixed image package's threshold
      record: async (o) => {
        if (o.kind === 'processed') thresholds.nudge(o.org, 'images');
      },
    },
  ]);

  return {
    config,
    log,
    services,
    ports: { ...enginePorts, queue, bus },
    processImage: new ProcessImageHandler({
      store: content,
      accounts,
      plans,
      ledger,
      fetcher,
      analyzer,
      log: log.child({ component: 'worker' }),
      now,
      retryBaseMs: config.RETRY_BASE_MS,
      embedderId: embedder.id,
      fair: new FairShare(config.WORKER_CONCURRENCY),
      imageSlots: new Slots(config.WORKER_CONCURRENCY),
      metrics,
      outcomes,
      tuning: activeProjections(accounts, tunedModels, now),
    }),
    embedder: embedderRef,
    startWebhookWork() {
      let kick = (): void => undefined;
      const work = startWebhookWork({
        batcher: new OutboxBatcher({
          outbox,
          directory,
          async dataset(id) {
            const ds = await accounts.getDatasetById(id);
            return (
              ds && {
                org: ds.org,
                name: ds.name,
                counts: (fresh) => content.counts(id, { fresh }),
              }
            );
          },
          now,
          log: webhookLog,
          owner,
          made: () => kick(),
        }),
        deliverer: new WebhookDeliverer({
          outbox,
          store: webhooks,
          directory,
          sender,
          sign: (hook, d, at) =>
            webhookHeaders(webhookSecret(serverKey, hook.id, hook.salt), d.id, at, d.body),
          now,
          log: webhookLog,
          owner,
          retryScale: config.WEBHOOK_RETRY_SCALE,
          metrics,
        }),
        thresholds,
        outbox,
        directory,
        now,
        log: webhookLog,
      });
      kick = work.kick;
      return work;
    },
    startDuplicatePass() {
      const pass = new DuplicatePass({
        store: duplicates,
        reader: content,
        engine,
        datasets: () => accounts.liveDatasets(),
        counts: (id) => content.counts(id),
        waitingForEmbedder: (id, embedderId) => content.staleEmbeddingCount(id, embedderId),
        now,
        log: log.child({ component: 'duplicates' }),
        owner,
      });
      return startDuplicatePass(
        pass,
        log.child({ component: 'duplicates' }),
        config.DUPLICATE_PASS_MS,
      );
    },
    startTuningPass() {
      const pass = new TuningPass({
        store: tuning,
        accounts,
        reader: content,
        engine,
        datasets: () => accounts.liveDatasets(),
        waitingForEmbedder: (id, embedderId) => content.staleEmbeddingCount(id, embedderId),
        now,
        log: log.child({ component: 'tuning' }),
        owner,
      });
      return startTuningPass(pass, log.child({ component: 'tuning' }), config.TUNING_PASS_MS);
    },
    bootstrapOperatorToken,
    async close() {
      await queue.close();
      services.datasetEvents.close();
      await progressNotices.close();
      await bus.close();
      await http.close();
      await sender.close();
      await metering.drain();
      // credits set aside for this process go back before the stores close
      await ledger
        .close?.()
        .catch((err: unknown) => log.warn({ err }, 'credit leases not returned'));
      await thresholds.drain();
      await publications.drain();
      await stores.close();
      await embedder.close?.();
    },
  };
}
