import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  fileHead,
  loadState,
  RejectedLog,
  resumeProblem,
  saveState,
  type ImportState,
} from '../../src/cli/import/state';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'vss-import-state-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function state(file: string, over: Partial<ImportState> = {}): ImportState {
  return {
    version: 1,
    input: { path: file, size: fs.statSync(file).size, head: fileHead(file) },
    org: 'acme',
    dataset: 'shoes',
    offset: 10,
    line: 3,
    accepted: 2,
    rejected: 0,
    rejectedBytes: 0,
    done: false,
    updatedAt: new Date().toISOString(),
    ...over,
  };
}

describe('resume state', () => {
  it('is written atomically and read back; no temp file is left', () => {
    const input = path.join(dir, 'a.jsonl');
    fs.writeFileSync(input, '{"id":"1"}\n{"id":"2"}\n');
    const file = path.join(dir, 'a.state.json');
    expect(loadState(file)).toBeUndefined();
    saveState(file, state(input));
    saveState(file, state(input, { offset: 22, line: 3 }));
    expect(loadState(file)).toMatchObject({ offset: 22, line: 3 });
    expect(fs.readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });

  it('refuses a state file that is not one', () => {
    const file = path.join(dir, 'junk.json');
    fs.writeFileSync(file, '{"hello":1}');
    expect(() => loadState(file)).toThrow(/not an import state/);
    fs.writeFileSync(file, '{');
    expect(() => loadState(file)).toThrow(/not valid JSON/);
  });

  it('resumes the same file, grown or not, but not another file or destination', () => {
    const input = path.join(dir, 'b.jsonl');
    fs.writeFileSync(input, 'line one\nline two\n');
    const s = state(input);
    const run = { file: input, size: fs.statSync(input).size, org: 'acme', dataset: 'shoes' };
    expect(resumeProblem(s, run)).toBeUndefined();
    fs.appendFileSync(input, 'line three\n');
    expect(resumeProblem(s, { ...run, size: fs.statSync(input).size })).toBeUndefined();
    expect(resumeProblem(s, { ...run, dataset: 'other' })).toMatch(/acme\/shoes/);
    fs.writeFileSync(input, 'LINE ONE\nline two\nline three\n');
    expect(resumeProblem(s, run)).toBe('the input file has changed since');
    fs.writeFileSync(input, 'line');
    const short = state(input, { offset: 100 });
    expect(resumeProblem(short, { ...run, size: 4 })).toMatch(/shorter than the 100 bytes/);
  });
});

describe('rejected-lines file', () => {
  it('appends records and is cut back to the saved size on resume', () => {
    const file = path.join(dir, 'x.rejected.jsonl');
    const log = new RejectedLog(file, 0);
    log.append([{ line: 1, reason: 'a' }]);
    const saved = log.bytes;
    log.append([{ line: 7, reason: 'b' }]);
    log.close();
    expect(fs.readFileSync(file, 'utf8').split('\n').filter(Boolean)).toHaveLength(2);
    const resumed = new RejectedLog(file, saved); // line 7 was not acknowledged
    expect(resumed.bytes).toBe(saved);
    resumed.append([{ line: 7, reason: 'b' }]);
    resumed.close();
    expect(fs.readFileSync(file, 'utf8')).toBe(
      '{"line":1,"reason":"a"}\n{"line":7,"reason":"b"}\n',
    );
    new RejectedLog(file, 0).close(); // a fresh start empties it
    expect(fs.readFileSync(file, 'utf8')).toBe('');
  });
});
