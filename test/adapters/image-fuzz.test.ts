/**
 * Fuzzing of the code that reads untrusted image bytes (test/helpers/image-fuzz.ts): no crash
 * (anything thrown but the reader's own Error), no input over 1 s, no allocation beyond what
 * the decode budget reserves for the input. The longer run is this file with more inputs:
 *
 *   FUZZ_INPUTS=1000000 FUZZ_SEED=2 FUZZ_REPORT=/tmp/fuzz.json FUZZ_TRACE=/tmp/fuzz.trace \
 *     nice npx jest test/adapters/image-fuzz.test.ts --selectProjects embedded
 *
 * FUZZ_INPUTS is per target; FUZZ_SEED (default 1) picks another set of inputs; a finding names
 * its seed and index, and FUZZ_ONLY=<index> reruns that input alone. FUZZ_REPORT writes the
 * figures as JSON; FUZZ_TRACE names a file that holds the input being run, should libvips crash
 * the process.
 */
import fs from 'node:fs';
import os from 'node:os';
import sharp from 'sharp';
import { dcFootprint } from '../../src/adapters/images/decode-budget';
import { decodeJpegDc } from '../../src/adapters/images/jpeg-dc';
import { LIMITS } from '../../src/domain/limits';
import {
  LARGEST_DC_WEIGHT,
  fuzz,
  jpegDcTarget,
  jpegSegments,
  jpegSeeds,
  tallyTypedArrays,
  tiffSeeds,
  tiffTarget,
  type FuzzReport,
  type Mutant,
  type Target,
} from '../helpers/image-fuzz';

const INPUTS = Number(process.env.FUZZ_INPUTS ?? 3000);
const SEED = Number(process.env.FUZZ_SEED ?? 1);
const ONLY = process.env.FUZZ_ONLY === undefined ? undefined : Number(process.env.FUZZ_ONLY);
/** The per-input goal of the issue. */
const MAX_MS = 1000;
/** Generous: on a loaded 2-core machine an input takes 1–3 ms; a hang fails at MAX_MS anyway. */
const TIMEOUT = 120_000 + INPUTS * 20;

let jpegs: Array<{ name: string; bytes: Uint8Array }>;
let tiffs: Awaited<ReturnType<typeof tiffSeeds>>;
const reports: Record<string, FuzzReport & { iccBytes?: number }> = {};

beforeAll(async () => {
  jpegs = await jpegSeeds();
  tiffs = await tiffSeeds(jpegs);
}, 60_000);

afterAll(() => {
  if (!process.env.FUZZ_REPORT || ONLY !== undefined) return;
  const cpus = os.cpus();
  const report = {
    date: new Date().toISOString(),
    machine: {
      cpus: cpus.length,
      model: cpus[0]?.model,
      memGiB: Math.round(os.totalmem() / 2 ** 30),
      node: process.version,
      loadAverage: os.loadavg(),
    },
    seed: SEED,
    inputsPerTarget: INPUTS,
    maxMsGoal: MAX_MS,
    budgets: {
      largestDcWeight: LARGEST_DC_WEIGHT,
      decodeBudgetBytes: LIMITS.decodeBudgetBytes,
    },
    seeds: { jpeg: jpegs.map((j) => j.name), tiff: tiffs.images.map((w) => w.from) },
    targets: reports,
  };
  fs.writeFileSync(process.env.FUZZ_REPORT, JSON.stringify(report, null, 2) + '\n');
});

/** Runs a target and checks the issue's three goals, naming any input that misses one. */
async function fuzzes<I>(target: Target<I>): Promise<FuzzReport> {
  const report = await fuzz(target, {
    seed: SEED,
    first: ONLY ?? 0,
    inputs: ONLY === undefined ? INPUTS : 1,
    maxMs: MAX_MS,
    maxRss: LIMITS.decodeBudgetBytes,
    every: 50_000,
    trace: process.env.FUZZ_TRACE,
    progress: (r) =>
      process.stderr.write(
        `${r.target}: ${r.inputs} inputs, ${r.inputsPerSecond.toFixed(0)}/s, slowest ${r.slowest.ms.toFixed(1)} ms, ` +
          `${Object.values(r.counts).reduce((a, b) => a + b)} findings\n`,
      ),
  });
  reports[target.name] = report;
  if (ONLY !== undefined) process.stderr.write(JSON.stringify(report, null, 2) + '\n');
  const findings = { crashes: report.crashes, slow: report.slow, overBudget: report.overBudget };
  expect({ seed: SEED, ...findings, wrong: report.wrong }).toEqual({
    seed: SEED,
    crashes: [],
    slow: [],
    overBudget: [],
    wrong: [],
  });
  return report;
}

/** A JPEG's bytes as a mutant of no mutation, for the target's checks. */
const asIs = (bytes: Uint8Array): Mutant => ({ bytes, seedFile: -1, steps: [] });
const u16 = (v: number) => [v >> 8, v & 255];

/** A small progressive JPEG as sharp writes it (grey or CMYK), 8 × 8. */
const tiny = (cmyk: boolean) => {
  const s = sharp({ create: { width: 8, height: 8, channels: 3, background: '#336699' } });
  return (cmyk ? s.toColourspace('cmyk') : s.toColourspace('b-w'))
    .jpeg({ progressive: true })
    .toBuffer();
};

/** `bytes` with its frame header's size set to width × height. */
function resized(bytes: Uint8Array, width: number, height: number): Buffer {
  const out = Buffer.from(bytes);
  const sof = jpegSegments(out).find((s) => s.marker === 0xc2)!;
  out.writeUInt16BE(height, sof.at + 5);
  out.writeUInt16BE(width, sof.at + 7);
  return out;
}

const segment = (marker: number, body: Uint8Array) =>
  Buffer.concat([Buffer.from([0xff, marker, ...u16(body.length + 2)]), body]);

describe('the fuzzing harness', () => {
  it('counts what the DC reader allocates', async () => {
    const seed = jpegs.find((j) => j.name === '640×368')!.bytes;
    const { value, bytes } = await tallyTypedArrays(() => decodeJpegDc(seed));
    // at least the luma coefficients (16 bits a block); within the weight the analyzer reserves
    expect(bytes).toBeGreaterThanOrEqual(2 * 80 * 46);
    expect(bytes).toBeLessThanOrEqual(dcFootprint({ width: 640, height: 368, channels: 3 }));
    expect(value?.width).toBe(80);
  });

  it('starts from seeds that read as libjpeg reads them', async () => {
    const target = jpegDcTarget([]);
    for (const { name, bytes } of jpegs) {
      const out = await target.run(asIs(bytes));
      expect({ name, wrong: out.wrong, over: out.allocated > out.budget }).toEqual({
        name,
        wrong: undefined,
        over: false,
      });
      if (name !== 'baseline')
        expect({ name, error: out.error }).toEqual({ name, error: undefined });
    }
    expect(tiffs.images.length).toBeGreaterThanOrEqual(jpegs.length - 1);
  });
});

describe('fuzzing the JPEG DC reader', () => {
  it(
    `${ONLY === undefined ? INPUTS : `input ${ONLY} of`} mutated JPEGs (seed ${SEED}): no crash, none over 1 s, none over its budget`,
    async () => {
      const report = await fuzzes(jpegDcTarget(jpegs.map((j) => j.bytes)));
      // the mutations must leave some inputs readable, or only the first checks are exercised
      if (ONLY === undefined) expect(report.answered).toBeGreaterThan(INPUTS / 50);
    },
    TIMEOUT,
  );

  // What the fuzzer found (frames above the pixel limit, DC scans that cost more than their
  // bytes) and what a review found with its oracle (the frame libjpeg reads), each as a small
  // input that shows it.

  it('reads the frame libjpeg reads when a TEM marker comes before it', async () => {
    // libjpeg takes TEM (FF01) as a marker without a length; read as one with a length, its next
    // two bytes (the next segment's marker, FFxx) skipped 65 KB, to a 40 MP frame hidden in an
    // APP15 segment: decoded under the weight of libjpeg's 8 × 8 one.
    const visible = await tiny(true);
    const segs = jpegSegments(visible);
    const sof = segs.find((s) => s.marker === 0xc2)!;
    const hidden = resized(visible, 6300, 6300).subarray(sof.at, sof.end);
    const head = Buffer.from([0xff, 0xd8, 0xff, 0x01]);
    const sos = segs.find((s) => s.marker === 0xda)!.at;
    const tables = visible.subarray(2, sos);
    // where a reader taking FF01's next two bytes (the next marker, FFxx) as a length lands
    const landing = head.length + visible.readUInt16BE(2);
    const padding = landing - head.length - tables.length - 4 - 4 - 100;
    const file = Buffer.concat([
      head,
      tables,
      segment(0xef, Buffer.alloc(padding)),
      segment(0xef, Buffer.concat([Buffer.alloc(100), hidden])),
      visible.subarray(sos),
    ]);
    expect((await sharp(file).metadata()).width).toBe(8);
    const out = await jpegDcTarget([]).run(asIs(file));
    expect(out.error).toBeUndefined();
    expect(out.wrong).toBeUndefined();
    expect(out.allocated).toBeLessThanOrEqual(out.budget);
  });

  it('refuses FF00 where a marker belongs, which libjpeg skips to the next marker', async () => {
    // Taken as a segment, FF00's next two bytes skipped the frame libjpeg reads, to a 40 MP one
    // hidden in an APP15 segment.
    const visible = await tiny(true);
    const segs = jpegSegments(visible);
    const sof = segs.find((s) => s.marker === 0xc2)!;
    const hidden = resized(visible, 6300, 6300).subarray(sof.at, sof.end);
    const sofBytes = visible.subarray(sof.at, sof.end);
    const file = Buffer.concat([
      visible.subarray(0, 2),
      Buffer.from([0xff, 0x00, ...u16(sofBytes.length + 6)]),
      sofBytes,
      segment(0xef, hidden),
      visible.subarray(2, sof.at),
      visible.subarray(sof.end),
    ]);
    expect((await sharp(file).metadata()).width).toBe(8);
    const out = await jpegDcTarget([]).run(asIs(file));
    expect((out.error as Error).message).toMatch(/FF00/);
    expect(out.allocated).toBeLessThanOrEqual(out.budget);
  });

  it('refuses a frame above the pixel limit before allocating for it', async () => {
    const huge = resized(await tiny(true), 65535, 65535);
    const { error, bytes } = await tallyTypedArrays(() => decodeJpegDc(huge));
    expect((error as Error).message).toMatch(/above 40000000 pixels/);
    expect(bytes).toBeLessThan(64 * 1024);
  });

  it('refuses DC scans without data at once, however large the frame', async () => {
    // A 40 MP frame with a DC scan and its 13 refinements, none holding a bit: a few hundred
    // bytes that, read as zeros, cost 14 passes over 2.5 million blocks (0.7–2.5 s before).
    const small = resized(await tiny(true), 6300, 6300);
    const sos = jpegSegments(small).find((s) => s.marker === 0xda)!;
    const header = small.subarray(sos.at, sos.at + 2 + small.readUInt16BE(sos.at + 2));
    const scan = (ah: number, al: number) =>
      Buffer.concat([header.subarray(0, -1), Buffer.from([(ah << 4) | al])]);
    const scans = [scan(0, 13)];
    for (let ah = 13; ah > 0; ah--) scans.push(scan(ah, ah - 1));
    const file = Buffer.concat([small.subarray(0, sos.at), ...scans, Buffer.from([0xff, 0xd9])]);
    expect((await sharp(file).metadata()).width).toBe(6300);
    const t0 = performance.now();
    await expect(decodeJpegDc(file)).rejects.toThrow('a DC scan cut short');
    expect(performance.now() - t0).toBeLessThan(MAX_MS);
  });

  it('refuses DC scans beyond the progression: a second first scan, a refinement out of turn', async () => {
    // Each DC scan is a pass over every block whatever its size: repeated, a few bytes each
    // multiplied the work of a file (50 repeats of a 16-byte scan took 3.4 s at 40 MP before).
    const seed = jpegs.find((j) => j.name === 'cmyk')!.bytes;
    const segs = jpegSegments(seed);
    const dc = segs.filter((s) => s.marker === 0xda && seed[s.at + 5 + 2 * seed[s.at + 4]!] === 0);
    const first = dc[0]!;
    const again = Buffer.concat([
      seed.subarray(0, first.end),
      seed.subarray(first.at, first.end),
      seed.subarray(first.end),
    ]);
    await expect(decodeJpegDc(again)).rejects.toThrow(/a second DC scan of component/);
    const refinement = dc[1]!;
    const twice = Buffer.concat([
      seed.subarray(0, refinement.end),
      seed.subarray(refinement.at, refinement.end),
      seed.subarray(refinement.end),
    ]);
    await expect(decodeJpegDc(twice)).rejects.toThrow(/out of sequence/);
    await expect(decodeJpegDc(seed)).resolves.toMatchObject({ channels: 4 });
  });
});

describe('fuzzing the TIFF hand-off', () => {
  it(
    `${ONLY === undefined ? INPUTS : `input ${ONLY} of`} written and mutated TIFFs (seed ${SEED}): no crash, none over 1 s, none over its budget`,
    async () => {
      const target = tiffTarget(tiffs.tiffs, tiffs.images, tiffs.profiles);
      const report = await fuzzes(target);
      reports[target.name] = { ...report, iccBytes: target.iccBytes };
      if (ONLY === undefined) expect(report.answered).toBeGreaterThan(INPUTS / 4);
    },
    TIMEOUT,
  );

  it('keeps an ICC profile of up to 4 bytes in its IFD entry, where readers look for it', async () => {
    // A value of 4 bytes or less is stored in the entry itself (TIFF 6.0, Value Offset); written
    // elsewhere with its offset in the entry, it read back as the offset's bytes.
    const target = tiffTarget([], [], []);
    const image = { width: 3, height: 2, channels: 3 as const, data: new Uint8Array(18).fill(7) };
    for (const icc of [[1], [1, 2], [1, 2, 3], [1, 2, 3, 4], [1, 2, 3, 4, 5]]) {
      const out = await target.run({ written: { image, icc: Uint8Array.from(icc), from: 'test' } });
      expect({ icc, wrong: out.wrong, error: out.error }).toEqual({
        icc,
        wrong: undefined,
        error: undefined,
      });
    }
  });
});
