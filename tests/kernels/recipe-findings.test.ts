// `npm run recipe -- --compare` (src/cli/_recipe-compare.ts) end to end on shortened arms, on Node
// WebGPU: the bundled tiny reasoner trains one GRPO step (R1-Zero, the teacher), is rejection-
// sampled, a tiny random student (one layer, C 16, the same tokenizer) is fine-tuned on the kept
// samples and then trained by GRPO, GRPO trains the student alone, and a cold start → GRPO runs on
// the reasoner; every arm is scored on the same held-out prompts and the findings are judged. The
// comparison is stopped mid-recipe (in the student's SFT) and run again: it continues from its run
// folder, keeping the evaluations already done. (That a resumed recipe trains exactly as an
// uninterrupted one is tests/kernels/recipe.test.ts's.) A student with another tokenizer is refused
// before anything trains.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { compareFindings, renderReport } from '../../src/cli/_recipe-compare';
import type { FindingsOptions } from '../../src/recipes/recipe-findings';
import { reverseVocabulary, tinyHfFolder } from '../support/tiny-hf-model';

const work = mkdtempSync(join(tmpdir(), 'grpo-findings-'));
const SFT = { perDeviceTrainBatchSize: 4, learningRate: 3e-4, maxLength: 128, saveSteps: 1 };
const SHORT: Partial<FindingsOptions> = {
  reasonerSteps: 1,
  studentSteps: 1,
  coldStartCount: 4,
  teacherPrompts: 8,
  teacherK: 4,
  coldStartSft: { ...SFT, numTrainEpochs: 1, maxSteps: 1 },
  // Two steps, so that a stop after the teacher's step and the student's first lands mid-stage.
  distillSft: { ...SFT, numTrainEpochs: 2, maxSteps: 2 },
  grpo: { numGenerations: 4, perStepPrompts: 1, maxCompletionLength: 48 },
};

describe('recipe findings comparison', { timeout: 600_000 }, () => {
  it('teacher → rejection samples → student SFT → student GRPO, every arm scored; a stop mid-recipe resumes from its run folder', async () => {
    const student = (await tinyHfFolder({ numLayers: 1, hiddenSize: 16 })).writeTo(
      join(work, 'student'),
    );
    const run = (name: string, stopAfterSteps?: number, lines: string[] = []) =>
      compareFindings({
        seeds: [4],
        outDir: join(work, name, 'out'),
        workDir: join(work, name, 'work'),
        model: 'bundled',
        student,
        command: 'test',
        promptLimit: 4,
        options: SHORT,
        stopAfterSteps,
        log: (l) => lines.push(l),
      });
    // Stopped after two optimizer steps: the teacher's one and the student SFT's first of two.
    const first: string[] = [];
    expect((await run('run', 2, first)).outcome).toBe('stopped');
    const dir = join(work, 'run', 'work', 'seed-4');
    expect(existsSync(join(dir, '2-student-sft', 'checkpoint-1'))).toBe(true);
    const studentConfig = JSON.parse(
      readFileSync(join(dir, '2-student-sft', 'checkpoint-1', 'config.json'), 'utf8'),
    );
    expect(studentConfig.hidden_size).toBe(16);
    expect(first.some((l) => l.includes('R1-Zero: GRPO alone: accuracy'))).toBe(true);
    expect(existsSync(join(work, 'run', 'out', 'findings.json'))).toBe(false);
    // The same command again continues the student's SFT from its checkpoint.
    const second: string[] = [];
    const resumed = await run('run', undefined, second);
    expect(resumed.outcome).toBe('finished');
    expect(
      second.some((l) => l.includes('resuming') && l.includes('2-student-sft/checkpoint-1')),
    ).toBe(true);
    // The teacher's evaluation was kept, not redone; the student's arms were scored now.
    expect(second.some((l) => l.includes('R1-Zero: GRPO alone: accuracy'))).toBe(false);
    expect(second.some((l) => l.includes('student: distilled from the teacher: accuracy'))).toBe(
      true,
    );
    const report = resumed.report!;
    // The resumed timeline: the SFT's two steps, not three.
    expect(report.perSeed[0].sftSteps.distill).toBe(2);
    const seed = report.perSeed[0];
    // The teacher's 8 prompts × 4 samples, some verified; the student trained 2 SFT steps on them.
    expect(seed.teacherSamples.sampled).toBe(32);
    expect(seed.teacherSamples.kept).toBeGreaterThan(0);
    expect(seed.sftSteps).toEqual({ distill: 2, coldStart: 1 });
    // Every trained arm was scored on 4 held-out completions, the models as loaded too.
    expect(Object.keys(seed.arms).sort()).toEqual(
      [
        'coldStart',
        'coldStartRl',
        'r1Zero',
        'studentDistill',
        'studentDistillRl',
        'studentRl',
      ].sort(),
    );
    for (const e of [report.base, report.studentBase, ...Object.values(seed.arms)]) {
      expect(e.n).toBe(4);
      expect(e.correct / e.n).toBeCloseTo(e.accuracy, 12);
      expect(e.reflecting).toBeLessThanOrEqual(4);
    }
    // One GRPO step per GRPO arm: its training accuracy curve.
    expect(Object.fromEntries(Object.entries(seed.curves).map(([k, v]) => [k, v.length]))).toEqual({
      r1Zero: 1,
      coldStartRl: 1,
      studentRl: 1,
      studentDistillRl: 1,
    });
    expect(report.findings.map((f) => f.id)).toEqual(['rl-alone', 'cold-start', 'distillation']);
    for (const f of report.findings) {
      expect(['reproduced', 'not reproduced', 'inconclusive']).toContain(f.verdict);
      for (const c of f.comparisons) expect(c.text).toMatch(/pooled over 1 seed\.$/);
    }
    // A random one-layer student is not the reasoner: its scores are its own.
    expect(report.studentBase).not.toEqual(report.base);

    const out = join(work, 'run', 'out');
    const readme = readFileSync(join(out, 'README.md'), 'utf8');
    expect(readme).toContain('## Verdicts');
    expect(readme).toContain('| RL alone teaches reasoning |');
    expect(readme).toContain('| student: distilled from the teacher |');
    expect(readme).toMatch(/Command: `test` — \*\*\d+\.\d minutes\*\*/);
    expect(existsSync(join(out, 'accuracy-reasoner.svg'))).toBe(true);
    expect(existsSync(join(out, 'partial.json'))).toBe(false);
    // A finished comparison leaves no run folders behind; --render rewrites the same README.
    expect(existsSync(join(work, 'run', 'work'))).toBe(false);
    rmSync(join(out, 'README.md'));
    renderReport(out);
    expect(readFileSync(join(out, 'README.md'), 'utf8')).toBe(readme);
  });

  it('refuses a student with another tokenizer before training anything', async () => {
    const folder = await tinyHfFolder({ numLayers: 1, hiddenSize: 16 });
    const other = reverseVocabulary(folder.writeTo(join(work, 'other-tokenizer')));
    const lines: string[] = [];
    await expect(
      compareFindings({
        seeds: [1],
        outDir: join(work, 'refused', 'out'),
        workDir: join(work, 'refused', 'work'),
        model: 'bundled',
        student: other,
        command: 'test',
        promptLimit: 1,
        options: SHORT,
        log: (l) => lines.push(l),
      }),
    ).rejects.toThrow(`the student '${other}' has another tokenizer than 'bundled'`);
    expect(lines).toEqual([]);
    expect(existsSync(join(work, 'refused'))).toBe(false);
  });
});
