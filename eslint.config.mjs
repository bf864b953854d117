import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// Vendor packages that the pure layers (domain, query, ports) must never import:
// those layers are shared by every engine and transport.
const vendor = [
  '@elastic/*',
  'amqplib',
  'sharp',
  'graphql',
  'type-graphql',
  '@apollo/*',
  'fastify',
  '@fastify/*',
  'better-sqlite3',
  'undici',
  'pino',
  'zod',
];

/** An import of another layer of src/, by directory name, however many `../` lead to it. */
const layer = (names, message) => ({ regex: `(^|/)(${names.join('|')})/`, message });

const pure = ['domain', 'query', 'ports', 'lib'];
const rules = (...patterns) => ({
  'no-restricted-imports': ['error', { patterns }],
});
const vendorFree = {
  group: vendor,
  message: 'domain/, query/, ports/ and lib/ stay free of vendor packages',
};
const boundaries = [
  {
    // The core: use cases and rules know nothing of transports, adapters or the composition root.
    files: ['src/{services,jobs,observability,config}/**/*.ts'],
    rules: rules(
      layer(
        ['api', 'app', 'adapters', 'cli', 'web'],
        'the core never imports a transport, an adapter or app/',
      ),
    ),
  },
  {
    files: pure.map((d) => `src/${d}/**/*.ts`),
    rules: rules(
      vendorFree,
      layer(
        ['api', 'app', 'adapters', 'cli', 'web', 'services', 'jobs'],
        'domain/, query/, ports/ and lib/ import only each other',
      ),
    ),
  },
  {
    // Vision requests reach items only through VisionScope, which applies a scoped token's
    // restrictions (contract §16): a new Vision service cannot read around it.
    files: ['src/services/**/*.ts'],
    // the duplicate report is an organisation-token admin read, not a Vision request (§18)
    ignores: ['src/services/{vision-scope,vision,content,datasets,usage,duplicates}.ts'],
    rules: rules(
      layer(
        ['api', 'app', 'adapters', 'cli', 'web'],
        'the core never imports a transport, an adapter or app/',
      ),
      {
        regex: '(^|/)ports/(search-engine|item-reader|content-store)$',
        importNames: ['SearchEngine', 'ItemReader', 'ContentStore', 'contentParts'],
        message: 'Vision reads go through VisionScope (services/vision-scope.ts)',
      },
    ),
  },
  {
    // Transports are given services (an interface they declare), never ports or adapters.
    files: ['src/api/**/*.ts'],
    rules: rules(
      layer(['app', 'adapters', 'ports', 'jobs', 'cli'], 'a transport calls services only'),
    ),
  },
  {
    files: ['src/adapters/**/*.ts'],
    rules: rules(layer(['api', 'app', 'services', 'cli'], 'an adapter implements ports only')),
  },
  {
    // The benchmarks are a package of their own that runs the server's build.
    files: ['bench/**/*.ts'],
    rules: rules(
      layer(['src', 'test'], 'bench imports the server as visual-search-service/dist/…'),
    ),
  },
];

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'node_modules/**',
      'data/**',
      '.cache/**',
      'coverage/**',
      'test/graphql/generated.ts',
      'src/web/console/graphql/generated.ts',
      '**/*.js',
      'src/generated/**',
      'test/generated/**',
      'bench/dist/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    // Type-aware: a promise nobody awaits or handles, or one passed where a callback's result is
    // ignored, is an error rather than a review comment.
    files: ['**/*.ts', '**/*.tsx'],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
    },
  },
  {
    rules: {
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
    },
  },
  {
    // Tests and benchmarks read untyped JSON response bodies.
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  // Import boundaries (ARCHITECTURE.md): the build fails when a layer reaches past its neighbours.
  ...boundaries,
);
