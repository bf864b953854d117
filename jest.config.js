/** @type {import('jest').Config} */
const base = {
  testEnvironment: 'node',
  // Type errors are caught by `npm run typecheck`; tests only transpile, which keeps them fast.
  transform: { '^.+\\.ts$': ['ts-jest', { diagnostics: false }] },
};

/**
 * Two runs of the same suites: on the embedded defaults, and on a real Elasticsearch (started by
 * scripts/services.sh when it is not already reachable). `--selectProjects embedded` skips it.
 */
module.exports = {
  testTimeout: 60000,
  projects: [
    { ...base, displayName: 'embedded', roots: ['<rootDir>/test'], testMatch: ['**/*.test.ts'] },
    {
      ...base,
      displayName: 'elasticsearch',
      roots: ['<rootDir>/test'],
      testMatch: ['**/e2e/accounts.test.ts', '**/e2e/content.test.ts', '**/e2e/search.test.ts'],
      globalSetup: '<rootDir>/test/setup/services.js',
      setupFiles: ['<rootDir>/test/setup/elasticsearch-env.js'],
    },
  ],
};
