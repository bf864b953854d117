import fs from 'node:fs';
import path from 'node:path';
import { schemaSdl } from '../../src/api/graphql/schema';

test('schema/schema.graphql is what the code emits (run `npm run schema:emit` after a change)', async () => {
  const committed = fs.readFileSync(path.join(__dirname, '../../schema/schema.graphql'), 'utf8');
  expect(committed).toBe(await schemaSdl());
});
