import path from 'node:path';
import { z } from 'zod';

/** Image embedders (docs/embedders.md); the first is the default. */
const EMBEDDERS = ['hybrid', 'efficientnet', 'descriptor', 'onnx'] as const;
export type EmbedderKind = (typeof EMBEDDERS)[number];
const PRECISIONS = ['float32', 'int8'] as const;
export type ModelPrecision = (typeof PRECISIONS)[number];

const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'], { message: 'expected true or false' })
  .transform((v) => ['true', '1', 'yes'].includes(v));

const ROLES = ['api', 'worker'] as const;

/** A destination the image fetcher may reach even when it is private. */
interface AllowedHost {
  /** As the WHATWG URL parser writes a URL's hostname: lowercase, IPv6 without brackets. */
  host: string;
  port: number;
}

const HOST_NAME =
  /^(?=.{1,253}\.?$)[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*\.?$/;

/**
 * One `host:port` entry, the port always written out (1–65535), the host a name, an IPv4
 * address or a bracketed IPv6 address, normalised as a URL naming it is (`LOCALHOST` →
 * `localhost`, `[::FFFF:127.0.0.1]` → `::ffff:7f00:1`), so the fetcher compares like with like.
 * No wildcards, ranges, schemes or paths: undefined.
 */
function parseHostPort(entry: string): AllowedHost | undefined {
  const m = /^(\[[0-9A-Fa-f:.]+\]|[^\s:/?#@[\]\\]+):(\d{1,5})$/.exec(entry);
  if (!m) return undefined;
  const port = Number(m[2]);
  if (port < 1 || port > 65535) return undefined;
  let host: string;
  try {
    host = new URL(`http://${m[1]}/`).hostname;
  } catch {
    return undefined;
  }
  if (host.startsWith('[')) return { host: host.slice(1, -1), port };
  return HOST_NAME.test(host) ? { host, port } : undefined;
}

const schema = z.object({
  PORT: z.coerce
    .number({ message: 'expected a port number' })
    .int()
    .min(0)
    .max(65535)
    .default(4000),
  HOST: z.string().min(1).default('0.0.0.0'),
  DATA_DIR: z.string().min(1).default('./data'),
  OPERATOR_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  SEARCH_BACKEND: z.enum(['embedded', 'elasticsearch']).default('embedded'),
  /** One node, or a comma list of nodes of one cluster (the client fails over between them). */
  ELASTICSEARCH_URL: z
    .string()
    .default('http://127.0.0.1:9200')
    .transform((s) =>
      s
        .split(',')
        .map((u) => u.trim())
        .filter(Boolean),
    )
    .refine(
      (us) => us.length > 0 && us.every((u) => /^https?:\/\/[^\s/]+/.test(u) && URL.canParse(u)),
      {
        message: 'expected an http(s) URL or a comma-separated list of them',
      },
    ),
  /** Primary shards and replicas of every index this service creates (contract §12). */
  ELASTICSEARCH_SHARDS: z.coerce
    .number({ message: 'expected a number' })
    .int()
    .min(1, 'at least 1')
    .max(64)
    .default(1),
  ELASTICSEARCH_REPLICAS: z.coerce
    .number({ message: 'expected a number' })
    .int()
    .min(0)
    .max(8)
    .default(1),
  /** Prefix of every index this service creates (several installations can share a cluster). */
  ES_INDEX_PREFIX: z
    .string()
    .regex(/^[a-z0-9][a-z0-9_-]{0,40}$/, 'lowercase letters, digits, _ or -')
    .default('vss-'),
  QUEUE: z.enum(['inprocess', 'rabbitmq']).default('inprocess'),
  AMQP_URL: z
    .string()
    .regex(/^amqps?:\/\//, 'expected an amqp:// URL')
    .default('amqp://guest:guest@127.0.0.1:5672'),
  /** Prefix of the RabbitMQ queues (several installations can share a vhost). */
  AMQP_QUEUE_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,60}$/, 'letters, digits, _, - or .')
    .default('vss.'),
  APP_ROLES: z
    .string()
    .default('api,worker')
    .transform((s) =>
      s
        .split(',')
        .map((r) => r.trim())
        .filter(Boolean),
    )
    .refine((rs) => rs.length > 0 && rs.every((r) => (ROLES as readonly string[]).includes(r)), {
      message: 'expected a comma-separated list of api, worker',
    })
    .transform((rs) => new Set(rs as Array<(typeof ROLES)[number]>)),
  WORKER_CONCURRENCY: z.coerce
    .number({ message: 'expected a number' })
    .int()
    .min(1)
    .max(256)
    .default(4),
  IMAGE_FETCH_ALLOW_PRIVATE: bool.default(false),
  /** Exact `host:port` destinations that may be private (contract §9), e.g. a local image server. */
  IMAGE_FETCH_ALLOW_HOSTS: z
    .string()
    .default('')
    .transform((s, ctx) => {
      const out: AllowedHost[] = [];
      const bad: string[] = [];
      for (const entry of s
        .split(',')
        .map((e) => e.trim())
        .filter(Boolean)) {
        const to = parseHostPort(entry);
        if (to) out.push(to);
        else bad.push(JSON.stringify(entry));
      }
      if (bad.length)
        ctx.addIssue({
          code: 'custom',
          message: `expected a comma list of exact host:port entries (e.g. 127.0.0.1:5123, localhost:5123, [::1]:5123); not ${bad.join(', ')}`,
        });
      return out;
    }),
  EMBEDDER: z.enum(EMBEDDERS).default('hybrid'),
  EMBEDDER_MODEL_PATH: z.string().optional(),
  /**
   * Which EfficientNet-Lite0 the hybrid and efficientnet embedders run: the float model or its
   * 8-bit quantisation (faster, vectors a little different, so another embedder id).
   */
  EMBEDDER_PRECISION: z.enum(PRECISIONS).default('float32'),
  /** Threads of one model run (runs are serialised per process); default: the cores. */
  EMBEDDER_THREADS: z.coerce
    .number({ message: 'expected a number' })
    .int()
    .min(1)
    .max(64)
    .optional(),
  /**
   * Most images in one model run: images that wait behind a run go together in the next
   * (serial-session.ts). 1 runs every image alone; default DEFAULT_MAX_BATCH there.
   */
  EMBEDDER_BATCH: z.coerce.number({ message: 'expected a number' }).int().min(1).max(64).optional(),
  PUBLIC_BASE_URL: z
    .url()
    .transform((u) => u.replace(/\/+$/, ''))
    .optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** First retry delay for transient image failures; later ones grow ×4. */
  RETRY_BASE_MS: z.coerce.number({ message: 'expected milliseconds' }).int().min(1).default(1000),
  // Divides the webhook retry schedule (5 s … 24 h); only tests need anything but 1.
  WEBHOOK_RETRY_SCALE: z.coerce
    .number({ message: 'expected a number ≥ 1' })
    .min(1, { message: 'expected a number ≥ 1' })
    .default(1),
  /** Whether workers keep the near-duplicate report current (contract §18). */
  DUPLICATE_REPORT: z.enum(['on', 'off']).default('on'),
  /** How often a worker looks for datasets whose duplicate report is behind (contract §18). */
  DUPLICATE_PASS_MS: z.coerce
    .number({ message: 'expected milliseconds' })
    .int()
    .min(100)
    .max(60_000)
    .default(5000),
  /** How often a worker looks for similarity fits that are due (contract §20). */
  TUNING_PASS_MS: z.coerce
    .number({ message: 'expected milliseconds' })
    .int()
    .min(100)
    .max(60_000)
    .default(5000),
  /** Requests per minute per token; 0 turns the limit off. */
  RATE_LIMIT_PER_MINUTE: z.coerce
    .number({ message: 'expected a number' })
    .int()
    .min(0)
    .default(1200),
  NODE_ENV: z.string().default('development'),
});

export type Config = z.output<typeof schema> & {
  dataDir: string;
  /** Settings given that this configuration does not use, each with the reason (banner, log). */
  ignored: string[];
};

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** Reads and validates the environment once; every bad variable is named in one error. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const input = Object.fromEntries(
    Object.entries(env).filter(([, v]) => v !== undefined && v !== ''),
  );
  const parsed = schema.safeParse(input);
  if (!parsed.success) {
    throw new ConfigError(
      parsed.error.issues.map((i) => {
        const name = String(i.path[0] ?? '?');
        return `${name}=${JSON.stringify(env[name] ?? '')}: ${i.message}`;
      }),
    );
  }
  const c = parsed.data;
  const problems: string[] = [];
  if (c.EMBEDDER === 'onnx' && !c.EMBEDDER_MODEL_PATH)
    problems.push('EMBEDDER_MODEL_PATH: required when EMBEDDER=onnx');
  // With Elasticsearch every piece of state is shared (contract §12); the in-process queue
  // keeps its jobs in a file under DATA_DIR, which other hosts cannot see.
  if (c.SEARCH_BACKEND === 'elasticsearch' && c.QUEUE === 'inprocess')
    problems.push(
      'QUEUE=inprocess: with SEARCH_BACKEND=elasticsearch jobs must be shared too; set QUEUE=rabbitmq (and AMQP_URL)',
    );
  if (problems.length) throw new ConfigError(problems);
  return { ...c, dataDir: path.resolve(c.DATA_DIR), ignored: ignoredSettings(input, c) };
}

/**
 * Settings that were given but that the chosen engine, queue, embedder or roles never read:
 * named at start (contract §12) instead of silently dropped.
 */
function ignoredSettings(given: Record<string, unknown>, c: z.output<typeof schema>): string[] {
  const out: string[] = [];
  const unused = (names: string[], why: string) => {
    for (const n of names) if (n in given) out.push(`${n} (${why})`);
  };
  if (c.SEARCH_BACKEND === 'embedded')
    unused(
      ['ELASTICSEARCH_URL', 'ELASTICSEARCH_SHARDS', 'ELASTICSEARCH_REPLICAS', 'ES_INDEX_PREFIX'],
      'SEARCH_BACKEND=embedded does not use Elasticsearch',
    );
  else unused(['DATA_DIR'], 'with SEARCH_BACKEND=elasticsearch every piece of state is shared');
  if (c.QUEUE === 'inprocess')
    unused(['AMQP_URL', 'AMQP_QUEUE_PREFIX'], 'QUEUE=inprocess does not use RabbitMQ');
  if (c.IMAGE_FETCH_ALLOW_PRIVATE)
    unused(['IMAGE_FETCH_ALLOW_HOSTS'], 'IMAGE_FETCH_ALLOW_PRIVATE=true allows every address');
  if (c.EMBEDDER !== 'onnx') unused(['EMBEDDER_MODEL_PATH'], `EMBEDDER=${c.EMBEDDER}`);
  if (c.EMBEDDER === 'descriptor')
    unused(['EMBEDDER_THREADS', 'EMBEDDER_BATCH'], 'EMBEDDER=descriptor runs no model session');
  if (c.EMBEDDER === 'descriptor' || c.EMBEDDER === 'onnx')
    unused(['EMBEDDER_PRECISION'], `EMBEDDER=${c.EMBEDDER} does not run EfficientNet-Lite0`);
  if (!c.APP_ROLES.has('worker'))
    unused(
      [
        'WORKER_CONCURRENCY',
        'RETRY_BASE_MS',
        'WEBHOOK_RETRY_SCALE',
        'DUPLICATE_PASS_MS',
        'DUPLICATE_REPORT',
        'TUNING_PASS_MS',
      ],
      'this process runs no worker',
    );
  // Not RATE_LIMIT_PER_MINUTE: a worker's ops server throttles /metrics and failed logins with it.
  if (!c.APP_ROLES.has('api')) unused(['PUBLIC_BASE_URL'], 'this process serves no API');
  return out;
}

/** A URL for logs and messages, without the credentials it may carry (AMQP_URL, ELASTICSEARCH_URL). */
export const redactUrl = (url: string): string => url.replace(/\/\/[^@/]*@/, '//***@');
