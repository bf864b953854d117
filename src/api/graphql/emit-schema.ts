/** `npm run schema:emit`: writes schema/schema.graphql from the code. */
import fs from 'node:fs';
import path from 'node:path';
import { schemaSdl } from './schema';

const target = path.resolve(__dirname, '../../../schema/schema.graphql');
void schemaSdl().then((sdl) => {
  fs.mkdirSync(path.dirname(target), { recursive: true });
  fs.writeFileSync(target, sdl);
  process.stdout.write(`wrote ${path.relative(process.cwd(), target)}\n`);
});
