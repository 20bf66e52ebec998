// The run folder's consistency on disk (src/cli/_run-folder.ts): a checkpoint folder replaced while
// the process dies between any two steps is either the old or the new one after recovery, never
// missing; a resumed run's logs lose the rows after the resumed step.
import * as fs from 'node:fs';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  recoverRunFolder,
  truncateStepLogs,
  writeFolderAtomically,
  type FolderFs,
} from '../../src/cli/_run-folder';

const bytes = (s: string) => new TextEncoder().encode(s);
const files = (tag: string) =>
  new Map([
    ['model.safetensors', bytes(`weights ${tag}`)],
    ['trainer_state.json', bytes(`{"tag":"${tag}"}`)],
  ]);
const tagOf = (dir: string) =>
  JSON.parse(readFileSync(join(dir, 'trainer_state.json'), 'utf8')).tag;

class Killed extends Error {}

/** node:fs, but the process "dies" (throws) on the n-th call of `op`. */
function dyingFs(op: keyof FolderFs, n: number): FolderFs {
  let calls = 0;
  const wrap =
    <A extends unknown[], R>(name: keyof FolderFs, f: (...a: A) => R) =>
    (...a: A): R => {
      if (name === op && ++calls === n) throw new Killed(`killed at ${name} #${n}`);
      return f(...a);
    };
  return {
    existsSync: wrap('existsSync', fs.existsSync),
    mkdirSync: wrap('mkdirSync', fs.mkdirSync) as FolderFs['mkdirSync'],
    renameSync: wrap('renameSync', fs.renameSync),
    rmSync: wrap('rmSync', fs.rmSync),
    writeFileSync: wrap('writeFileSync', fs.writeFileSync),
  };
}

function runWithOld(): { run: string; dir: string } {
  const run = mkdtempSync(join(tmpdir(), 'grpo-run-folder-'));
  const dir = join(run, 'checkpoint-4');
  writeFolderAtomically(dir, files('old'));
  return { run, dir };
}

describe('replacing a checkpoint folder', () => {
  it('writes the new folder and leaves nothing beside it', () => {
    const { run, dir } = runWithOld();
    writeFolderAtomically(dir, files('new'));
    expect(tagOf(dir)).toBe('new');
    expect(readdirSync(run)).toEqual(['checkpoint-4']);
  });

  // Every point where the process can die: during the writes, after moving the old folder aside
  // (the moment the former rmSync-then-renameSync lost the checkpoint), after moving the new one in.
  const deaths: { at: string; fs: () => FolderFs; expected: 'old' | 'new'; action: RegExp }[] = [
    {
      at: 'while writing the files',
      fs: () => dyingFs('writeFileSync', 2),
      expected: 'old',
      action: /removed .*checkpoint-4\.partial/,
    },
    {
      at: 'after the old folder was moved aside',
      fs: () => dyingFs('renameSync', 2),
      expected: 'old',
      action: /restored .*checkpoint-4 from .*checkpoint-4\.old/,
    },
    {
      at: 'after the new folder was moved in',
      fs: () => dyingFs('rmSync', 3),
      expected: 'new',
      action: /removed .*checkpoint-4\.old/,
    },
  ];
  for (const death of deaths) {
    it(`a kill ${death.at} keeps a complete folder (${death.expected}) after recovery`, () => {
      const { run, dir } = runWithOld();
      expect(() => writeFolderAtomically(dir, files('new'), death.fs())).toThrow(Killed);
      const actions = recoverRunFolder(run);
      expect(actions.join('\n')).toMatch(death.action);
      expect(readdirSync(run)).toEqual(['checkpoint-4']);
      expect(tagOf(dir)).toBe(death.expected);
      expect(readdirSync(dir).sort()).toEqual(['model.safetensors', 'trainer_state.json']);
      // Recovery is idempotent, and the next save replaces the folder normally.
      expect(recoverRunFolder(run)).toEqual([]);
      writeFolderAtomically(dir, files('next'));
      expect(tagOf(dir)).toBe('next');
    });
  }

  it('recovery touches only its own folder names', () => {
    const run = mkdtempSync(join(tmpdir(), 'grpo-run-folder-'));
    fs.mkdirSync(join(run, 'notes.old'));
    fs.mkdirSync(join(run, 'data.partial'));
    writeFileSync(join(run, 'metrics.jsonl'), '');
    expect(recoverRunFolder(run)).toEqual([]);
    expect(readdirSync(run).sort()).toEqual(['data.partial', 'metrics.jsonl', 'notes.old']);
  });
});

describe('resuming cuts the step logs back to the checkpoint', () => {
  it('keeps the rows up to the step, drops later and torn rows', () => {
    const run = mkdtempSync(join(tmpdir(), 'grpo-run-logs-'));
    const rows = (steps: number[]) => steps.map((step) => JSON.stringify({ step, loss: step }));
    writeFileSync(join(run, 'metrics.jsonl'), rows([1, 2, 3]).join('\n') + '\n{"step": 4, "lo');
    writeFileSync(join(run, 'samples.jsonl'), rows([1, 2]).join('\n') + '\n');
    writeFileSync(join(run, 'evals.jsonl'), rows([2, 3]).join('\n') + '\n');
    expect(truncateStepLogs(run, 2)).toEqual({ 'metrics.jsonl': 2, 'evals.jsonl': 1 });
    const steps = (f: string) =>
      readFileSync(join(run, f), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).step);
    expect(steps('metrics.jsonl')).toEqual([1, 2]);
    expect(steps('samples.jsonl')).toEqual([1, 2]);
    expect(steps('evals.jsonl')).toEqual([2]);
    expect(readFileSync(join(run, 'metrics.jsonl'), 'utf8')).toBe(rows([1, 2]).join('\n') + '\n');
    expect(readdirSync(run).sort()).toEqual(['evals.jsonl', 'metrics.jsonl', 'samples.jsonl']);
  });
});
