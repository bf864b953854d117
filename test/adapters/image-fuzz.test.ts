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
import { dcFootprint } from '../../src/adapters/images/decode-budget';
import { decodeJpegDc } from '../../src/adapters/images/jpeg-dc';
import { LIMITS } from '../../src/domain/limits';
import {
  LARGEST_DC_WEIGHT,
  fuzz,
  jpegDcTarget,
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
});
