import { buildSubgraphSchema } from '@apollo/subgraph';
import fs from 'node:fs';
import path from 'node:path';
import { schemaSdl } from '../../src/api/graphql/schema';

test('schema/schema.graphql is what the code emits (run `npm run schema:emit` after a change)', async () => {
  const committed = fs.readFileSync(path.join(__dirname, '../../schema/schema.graphql'), 'utf8');
  expect(committed).toBe(await schemaSdl());
});

test('every GraphQL example in docs/ is valid against the schema', async () => {
  const { parse, validate } = await import('graphql');
  // The committed SDL is a Federation 2 subgraph's (@link, @key): built as a router would.
  const schema = buildSubgraphSchema(
    parse(fs.readFileSync(path.join(__dirname, '../../schema/schema.graphql'), 'utf8')),
  );
  const docs = path.join(__dirname, '../../docs');
  const examples = fs
    .readdirSync(docs)
    .filter((f) => f.endsWith('.md'))
    .flatMap((f) =>
      [...fs.readFileSync(path.join(docs, f), 'utf8').matchAll(/```graphql\n([\s\S]*?)```/g)].map(
        (m) => [f, m[1]!] as const,
      ),
    );
  expect(examples.length).toBeGreaterThanOrEqual(3);
  for (const [file, text] of examples) {
    const errors = validate(schema, parse(text)).map((e) => e.message);
    expect([file, text.slice(0, 40), errors]).toEqual([file, text.slice(0, 40), []]);
  }
});

test('the committed SDL is a Federation 2 subgraph with VisionItem as an entity (contract §19)', () => {
  const sdl = fs.readFileSync(path.join(__dirname, '../../schema/schema.graphql'), 'utf8');
  expect(sdl).toContain('@link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])');
  expect(sdl).toMatch(/type VisionItem\s+@key\(fields: "organisation dataset id"\)/);
});
