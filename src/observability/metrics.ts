import client from 'prom-client';
import type { EventOutbox } from '../ports/event-outbox';
import type { JobQueue } from '../ports/job-queue';

/**
 * The process's Prometheus metrics (contract §12), on a registry of its own so that several
 * services in one process (tests) do not share counters. Label values are route templates,
 * operation names and fixed words: never a token, an organisation, a dataset or an item.
 */
export class Metrics {
  readonly registry = new client.Registry();

  readonly httpDuration = new client.Histogram({
    name: 'http_request_duration_seconds',
    help: 'REST and GraphQL HTTP requests, by method, route template and status.',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  readonly graphqlDuration = new client.Histogram({
    name: 'graphql_operation_duration_seconds',
    help: 'GraphQL operations, by operation name (anonymous when unnamed).',
    labelNames: ['operation'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  readonly imageJobs = new client.Counter({
    name: 'image_jobs_total',
    help: 'Image jobs finished by this process: processed, failed (recorded as an error) or retried.',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  readonly imageJobDuration = new client.Histogram({
    name: 'image_job_duration_seconds',
    help: 'One image job: download, decode, embed, store.',
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });

  readonly embedderRunImages = new client.Histogram({
    name: 'embedder_run_images',
    help: 'Images per model run: images that wait behind a run are run together in the next.',
    buckets: [1, 2, 3, 4, 6, 8, 16],
    registers: [this.registry],
  });

  readonly engineDuration = new client.Histogram({
    name: 'search_engine_request_duration_seconds',
    help: 'Calls to the search engine (SQLite or Elasticsearch), by operation.',
    labelNames: ['operation'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });

  readonly portDuration = new client.Histogram({
    name: 'port_request_duration_seconds',
    help: 'Calls to the stateful ports other than the search engine (accounts, itemReader, itemWriter, itemProcessing, ledger, events, keys, queue), by port and operation.',
    labelNames: ['port', 'operation'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });

  readonly fetchedBytes = new client.Counter({
    name: 'image_fetch_bytes_total',
    help: 'Image bytes downloaded.',
    registers: [this.registry],
  });

  readonly webhookDeliveries = new client.Counter({
    name: 'webhook_deliveries_total',
    help: 'Webhook delivery attempts by outcome: delivered, retried (to be tried again), failed (given up: retries exhausted or 410), refused (the address is not allowed).',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  readonly webhookDeliveryDuration = new client.Histogram({
    name: 'webhook_delivery_duration_seconds',
    help: 'One webhook delivery attempt, from connecting to the answer.',
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  constructor() {
    client.collectDefaultMetrics({ register: this.registry });
  }

  /**
   * Outbox depth by state (item facts not yet batched; deliveries due; deliveries scheduled
   * later) and the age of the oldest waiting work, from one outbox read per scrape.
   */
  watchOutbox(outbox: EventOutbox, now: () => number = Date.now): void {
    let read: { at: number; depth: ReturnType<EventOutbox['depth']> } | undefined;
    const depth = () => {
      if (!read || now() - read.at > 1000) {
        const p = outbox.depth(now());
        p.catch(() => undefined);
        read = { at: now(), depth: p };
      }
      return read.depth;
    };
    new client.Gauge({
      name: 'webhook_outbox_depth',
      help: 'Webhook outbox by state: unbatched (item facts not yet in a delivery), due (deliveries to attempt now), scheduled (deliveries waiting for a later attempt).',
      labelNames: ['state'] as const,
      registers: [this.registry],
      async collect() {
        const d = await depth().catch(() => undefined);
        this.reset();
        if (!d) return;
        for (const state of ['unbatched', 'due', 'scheduled'] as const)
          this.set({ state }, d[state]);
      },
    });
    new client.Gauge({
      name: 'webhook_outbox_oldest_age_seconds',
      help: 'Age of the oldest unbatched item fact or due delivery (0 when none waits; NaN when the outbox cannot be read).',
      registers: [this.registry],
      async collect() {
        const d = await depth().catch(() => undefined);
        if (!d) this.set(NaN);
        else this.set(d.oldestAt === undefined ? 0 : Math.max(0, now() - d.oldestAt) / 1000);
      },
    });
  }

  /**
   * Times the calls of one port (PortPolicy.time), `operation` = the method's name: the search
   * engine in its own histogram, which the dashboard reads, every other port by `port` here.
   */
  portTimer(port: string): (operation: string) => () => void {
    if (port === 'engine') return (operation) => this.engineDuration.startTimer({ operation });
    return (operation) => this.portDuration.startTimer({ port, operation });
  }

  /**
   * Queue depth and the oldest job's age, read from the queue when scraped. `queue` is the
   * label: jobs ready to run, delayed retries, running, dead-lettered. `now`: the queue's
   * clock, so a read is reused for at most a second of the time its ages are counted in.
   */
  watchQueue(queue: JobQueue, consumes: boolean, now: () => number = Date.now): void {
    // One read per scrape for both gauges: on RabbitMQ a read opens a channel and checks
    // every queue of the installation.
    let read: { at: number; stats: ReturnType<JobQueue['stats']> } | undefined;
    const stats = () => {
      if (!read || now() - read.at > 1000) read = { at: now(), stats: queue.stats() };
      return read.stats;
    };
    new client.Gauge({
      name: 'queue_depth',
      help: 'Image jobs by state: ready, delayed (waiting to retry), running, dead.',
      labelNames: ['state'] as const,
      registers: [this.registry],
      async collect() {
        const s = await stats().catch(() => undefined);
        // an unreadable queue reports nothing rather than its last figures
        this.reset();
        if (!s) return;
        for (const state of ['ready', 'delayed', 'running', 'dead'] as const)
          this.set({ state }, s[state]);
      },
    });
    if (!consumes) return;
    new client.Gauge({
      name: 'queue_oldest_job_age_seconds',
      help: 'How long the oldest runnable job has waited (0 when none waits).',
      registers: [this.registry],
      async collect() {
        const s = await stats().catch(() => undefined);
        // Unknown (NaN) while the queue cannot be read or cannot tell the age (QueueStats): a 0
        // would say that nothing waits, and hide an outage from the queue-age alerts.
        const ms = s?.oldestReadyAgeMs;
        this.set(ms === undefined ? NaN : ms / 1000);
      },
    });
  }
}
