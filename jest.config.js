const fs = require('node:fs');
const path = require('node:path');

// The suites' data directories (os.tmpdir()) go to tmpfs when the machine has room there and
// TMPDIR is not set: the embedded stores commit with synchronous = FULL, and on a disk each
// fsync blocks a suite. A SIGKILL, the crash the tests make, keeps what tmpfs holds just as it
// keeps a disk's page cache; only a power cut would differ, and no test makes one.
// tmpfs is memory, so what earlier runs' suites left there (vss-*) goes once it is two hours
// old: no run takes that long.
const SHM = '/dev/shm';
const LEFT_OVER_MS = 2 * 3600_000;
if (!process.env.TMPDIR && fs.existsSync(SHM)) {
  for (const name of fs.readdirSync(SHM)) {
    const dir = path.join(SHM, name);
    try {
      if (name.startsWith('vss-') && Date.now() - fs.statSync(dir).mtimeMs > LEFT_OVER_MS)
        fs.rmSync(dir, { recursive: true, force: true });
    } catch {
      // another run's, or gone meanwhile
    }
  }
  const { bavail, bsize } = fs.statfsSync(SHM);
  if (bavail * bsize >= 2 ** 31) process.env.TMPDIR = SHM;
}

/** @type {import('jest').Config} */
const base = {
  testEnvironment: 'node',
  // Type errors are caught by `npm run typecheck`; tests only transpile, which keeps them fast.
  // test/setup/transform.js is ts-jest with the intrinsics bound per module (see there).
  transform: { '^.+\\.ts$': ['<rootDir>/test/setup/transform.js', { diagnostics: false }] },
};

/**
 * `embedded`: everything that needs no outside service, on the embedded defaults, including the
 * embedded half of every contract suite (test/contract/tier.ts). `npm run test:fast` runs it alone,
 * with four workers: most of its time is spent waiting on servers and workers, not computing.
 * `production`: the REST end-to-end suites again on Elasticsearch + RabbitMQ, as an installation
 * of two API hosts and two workers (test/helpers/app.ts), the Elasticsearch and RabbitMQ half of
 * the contract suites, the cases only the Elasticsearch adapters have
 * (test/adapters/elasticsearch), the multi-process scale-out test and the fault tests. Its
 * globalSetup starts the local services via scripts/services.sh when they are not already
 * reachable. `--selectProjects embedded` skips it.
 */
module.exports = {
  testTimeout: 60000,
  projects: [
    {
      ...base,
      displayName: 'embedded',
      roots: ['<rootDir>/test'],
      testMatch: ['**/*.test.ts'],
      testPathIgnorePatterns: [
        '/test/adapters/elasticsearch/',
        '/test/faults/',
        '/test/browser/',
        '/test/production/',
      ],
    },
    {
      ...base,
      displayName: 'browser',
      roots: ['<rootDir>/test'],
      testMatch: ['**/browser/*.test.ts'],
      globalSetup: '<rootDir>/test/setup/browser.js',
    },
    {
      ...base,
      displayName: 'production',
      roots: ['<rootDir>/test'],
      testMatch: [
        '**/e2e/accounts.test.ts',
        '**/e2e/content.test.ts',
        '**/e2e/search.test.ts',
        '**/e2e/figures.test.ts',
        '**/e2e/groups.test.ts',
        '**/e2e/discovery.test.ts',
        '**/e2e/scoped-tokens.test.ts',
        '**/e2e/report.test.ts',
        '**/e2e/popularity.test.ts',
        '**/e2e/default-embedder.test.ts',
        '**/e2e/metrics.test.ts',
        '**/e2e/graphql.test.ts',
        '**/e2e/federation.test.ts',
        '**/e2e/graphql-transport.test.ts',
        '**/e2e/subscriptions.test.ts',
        '**/e2e/webhooks.test.ts',
        '**/e2e/webhooks-retries.test.ts',
        '**/e2e/usage.test.ts',
        '**/e2e/similarity.test.ts',
        '**/e2e/tuned-similarity.test.ts',
        '**/e2e/embedder-change.test.ts',
        '**/e2e/ports.test.ts',
        '**/e2e/http-edges.test.ts',
        '**/e2e/graphql-hardening.test.ts',
        '**/e2e/openapi.test.ts',
        '**/e2e/readiness.test.ts',
        '**/e2e/duplicates.test.ts',
        '**/contract/*.test.ts',
        '**/adapters/elasticsearch/*.test.ts',
        '**/production/*.test.ts',
        '**/faults/*.test.ts',
      ],
      testPathIgnorePatterns: ['/faults/es-cluster.test.ts'],
      globalSetup: '<rootDir>/test/setup/services.js',
      globalTeardown: '<rootDir>/test/setup/cleanup.js',
      setupFiles: ['<rootDir>/test/setup/production-env.js'],
    },
    {
      // A node of a three-node Elasticsearch cluster is SIGKILLed mid-ingest (the test starts
      // and stops the cluster itself; RabbitMQ comes from the services set-up).
      ...base,
      displayName: 'es-cluster',
      roots: ['<rootDir>/test'],
      testMatch: ['**/faults/es-cluster.test.ts'],
      globalSetup: '<rootDir>/test/setup/services.js',
      globalTeardown: '<rootDir>/test/setup/cleanup.js',
      setupFiles: ['<rootDir>/test/setup/production-env.js'],
    },
  ],
};
