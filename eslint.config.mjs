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
  {
    files: ['src/domain/**/*.ts', 'src/query/**/*.ts', 'src/ports/**/*.ts', 'src/lib/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: vendor,
              message: 'domain/, query/, ports/ and lib/ stay free of vendor packages',
            },
          ],
        },
      ],
    },
  },
);
