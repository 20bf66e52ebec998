// Rejection sampling with a scripted model: the bundled model's real tokenizer and Countdown task,
// a generator whose completions are written out per prompt and chosen by the seed, so the test
// knows exactly which completions are right, well-formed, finished, in bounds and unique. Checks
// that exactly the verified completions are kept, the per-prompt counts and reasons, the SFT JSONL
// and that a seed fixes the set. Also the language-consistency score (R1 §2.3.3), and which
// prompts a run's rejection sampling draws (trainingProblems: never a held-out one).
import { beforeAll, describe, expect, it } from 'vitest';
import { loadHfFolder } from '../../src/formats/hf-folder';
import { folderSource } from '../../src/formats/model-source';
import { loadTokenizer, type Tokenizer } from '../../src/formats/tokenizer';
import {
  languageConsistency,
  languageConsistencyReward,
} from '../../src/rewards/language-consistency';
import {
  rejectionFiles,
  rejectionSample,
  toSftJsonl,
  trainingProblems,
  type RejectionContext,
} from '../../src/recipes/rejection-sampling';
import { renderPrompt } from '../../src/grpo/trainer';
import type { SampleOptions, SampleResult, TextGenerator } from '../../src/model/sampler';
import { createTask, trainEvalProblems } from '../../src/tasks';
import type { Problem, Task } from '../../src/tasks/types';

const DIR = 'public/models/tiny-reasoner';

/** What the scripted model can answer for a problem: text and whether it ended with EOS. */
function script(problem: Problem): { text: string; finished: boolean }[] {
  const right = problem.reference!;
  return [
    { text: ` <think> ${right} </think> <answer> ${right} </answer>`, finished: true }, // 0 kept
    { text: ' <think> 1 + 1 </think> <answer> 1 + 1 </answer>', finished: true }, // 1 wrong
    { text: ` <answer> ${right} </answer>`, finished: true }, // 2 format
    { text: ' <think> 3 </think>', finished: true }, // 3 no answer (and format)
    { text: ` <think> ${right} </think> <answer> ${right} </answer>`, finished: false }, // 4 truncated
    { text: ` <think> wait ${right} </think> <answer> ${right} </answer>`, finished: true }, // 5 kept
  ];
}

/**
 * The scripted model: sequence n of a generate() call (its prompt is n / k of the batch) gets
 * script entry (n + seed + stream) mod 6, so a seed picks which completions come out. Prompts are
 * matched back to problems by their token ids.
 */
class ScriptedModel implements TextGenerator {
  calls = 0;
  constructor(
    private readonly tok: Tokenizer,
    private readonly byPrompt: Map<string, Problem>,
  ) {}

  async generate(prompts: readonly (readonly number[])[], o: SampleOptions): Promise<SampleResult> {
    this.calls++;
    const eos = o.eosTokenIds[0];
    const out: SampleResult = { completions: [], finished: [], logps: [] };
    prompts.forEach((ids, n) => {
      const problem = this.byPrompt.get(ids.join(','))!;
      const entry = script(problem)[(n + o.seed + o.stream) % 6];
      const completion = this.tok.encode(entry.text, { addSpecialTokens: false });
      if (entry.finished) completion.push(eos);
      out.completions.push(completion.slice(0, o.maxNewTokens));
      out.finished.push(entry.finished);
      out.logps.push(new Float32Array(completion.length));
    });
    return out;
  }
}

describe('rejection sampling', () => {
  let tok: Tokenizer;
  let task: Task;
  let problems: Problem[];
  let ctx: RejectionContext & { generator: ScriptedModel };

  beforeAll(async () => {
    const loaded = await loadHfFolder(folderSource(DIR));
    tok = await loadTokenizer(loaded.tokenizerFiles, {
      eosTokenIds: loaded.generation.eosTokenIds,
    });
    task = createTask('countdown');
    problems = task.generate(7, 3);
    const render = (p: Problem) => renderPrompt(task, tok, p, 'r1-zero');
    const byPrompt = new Map(problems.map((p) => [render(p).ids.join(','), p]));
    ctx = {
      generator: new ScriptedModel(tok, byPrompt),
      tokenizer: tok,
      task,
      renderPrompt: render,
    };
  });

  const base = { temperature: 1, maxCompletionLength: 64, batchSize: 2 };

  it('keeps exactly the verified, well-formed, finished completions, with counts and reasons', async () => {
    // k = 6 and seed 0: prompt b of a batch at stream s sees entries (6b + j + s) mod 6, i.e.
    // every script entry once (shifted by the stream), so each prompt keeps entries 0 and 5.
    const report = await rejectionSample(ctx, problems, { ...base, k: 6, seed: 0 });
    expect(report.sampled).toBe(18);
    expect(report.kept).toBe(6);
    expect(report.yield).toBeCloseTo(6 / 18, 12);
    expect(report.perPrompt).toEqual(
      problems.map((p) => ({ problemId: p.id, sampled: 6, kept: 2 })),
    );
    expect(report.reasons).toEqual({
      wrong: 3,
      'no-answer': 3,
      unverifiable: 0,
      format: 6, // entry 2 (no think) and entry 3 (no answer)
      truncated: 3,
      'too-short': 0,
      'too-long': 0,
      language: 0,
      duplicate: 0,
    });
    // Per prompt, the kept completions are exactly script entries 0 and 5 (the truncated copy of
    // entry 0 is rejected as truncated), decoded from the real tokenizer's ids.
    for (const p of problems) {
      const r = p.reference!;
      const kept = report.samples.filter((s) => s.problemId === p.id && s.kept);
      expect(kept.map((s) => s.completion.trim()).sort()).toEqual(
        [
          `<think> ${r} </think> <answer> ${r} </answer>`,
          `<think> wait ${r} </think> <answer> ${r} </answer>`,
        ].sort(),
      );
      const truncated = report.samples.filter(
        (s) => s.problemId === p.id && s.reasons.includes('truncated'),
      );
      expect(truncated.map((s) => [s.completion.trim(), s.reasons])).toEqual([
        [`<think> ${r} </think> <answer> ${r} </answer>`, ['truncated']],
      ]);
    }
    const lines = toSftJsonl(report)
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(6);
    expect(lines[0]).toEqual({
      prompt: renderPrompt(task, tok, problems[0], 'r1-zero').text,
      completion: report.samples.find((s) => s.kept)!.completion,
      problem_id: problems[0].id,
    });
  });

  it('drops duplicates of a kept completion and applies the length bounds', async () => {
    // k = 12: every script entry twice per prompt; the second copy of each kept one is a duplicate.
    const report = await rejectionSample(ctx, problems.slice(0, 1), { ...base, k: 12, seed: 0 });
    expect(report.kept).toBe(2);
    expect(report.reasons.duplicate).toBe(2);
    const lengths = report.samples.filter((s) => s.kept).map((s) => s.length);
    const shortest = Math.min(...lengths);
    const bounded = await rejectionSample(ctx, problems.slice(0, 1), {
      ...base,
      k: 6,
      seed: 0,
      maxLength: shortest,
    });
    // The "wait" completion is one word longer than the plain one: only the plain one fits.
    expect(bounded.samples.filter((s) => s.kept).map((s) => s.length)).toEqual([shortest]);
    expect(bounded.reasons['too-long']).toBeGreaterThanOrEqual(1);
    const all = await rejectionSample(ctx, problems.slice(0, 1), {
      ...base,
      k: 12,
      seed: 0,
      dedupe: false,
    });
    expect([all.kept, all.reasons.duplicate]).toEqual([4, 0]);
  });

  it('is deterministic for a seed, and another seed draws other completions', async () => {
    const a = await rejectionSample(ctx, problems, { ...base, k: 2, seed: 3 });
    const b = await rejectionSample(ctx, problems, { ...base, k: 2, seed: 3 });
    const c = await rejectionSample(ctx, problems, { ...base, k: 2, seed: 4 });
    expect(b).toEqual(a);
    expect(c.samples.map((s) => s.completion)).not.toEqual(a.samples.map((s) => s.completion));
  });

  it("judges format on the model's whole turn: a prompt's opened <think> counts", async () => {
    // A chat template that opens the think block (DeepSeek-R1-Distill's generation prompt ends in
    // "<think>\n"): the completion writes the reasoning and closes it. The format reward the run
    // trained on accepts that turn, so rejection sampling keeps it; the same completion after the
    // plain R1-Zero prompt lacks its <think> and is rejected for format.
    const p = problems[0];
    const r = p.reference!;
    const text = ` ${r} </think> <answer> ${r} </answer>`;
    const generator: TextGenerator = {
      async generate(prompts, o) {
        const ids = [...tok.encode(text, { addSpecialTokens: false }), o.eosTokenIds[0]];
        return {
          completions: prompts.map(() => ids),
          finished: prompts.map(() => true),
          logps: prompts.map(() => new Float32Array(ids.length)),
        };
      },
    };
    const opened = (q: Problem) => {
      const t = `${renderPrompt(task, tok, q, 'r1-zero').text}<think>\n`;
      return { text: t, ids: tok.encode(t) };
    };
    const run = (renderPrompt: RejectionContext['renderPrompt']) =>
      rejectionSample({ generator, tokenizer: tok, task, renderPrompt }, [p], {
        ...base,
        k: 1,
        seed: 0,
      });
    const afterThink = await run(opened);
    expect(afterThink.samples.map((s) => [s.completion, s.kept, s.reasons])).toEqual([
      [text, true, []],
    ]);
    const plain = await run((q) => renderPrompt(task, tok, q, 'r1-zero'));
    expect(plain.samples.map((s) => s.reasons)).toEqual([['format']]);
  });

  it('refuses impossible options with the reason', async () => {
    await expect(rejectionSample(ctx, problems, { ...base, k: 0, seed: 0 })).rejects.toThrow(
      'rejection sampling: k must be an integer ≥ 1, got 0',
    );
    await expect(
      rejectionSample(ctx, problems, { ...base, k: 1, seed: 0, minLength: 9, maxLength: 3 }),
    ).rejects.toThrow('rejection sampling: minLength 9 > maxLength 3');
  });
});

describe('language consistency (R1 §2.3.3)', () => {
  it('is the share of words with letters written in the target script', () => {
    expect(languageConsistency('we add 3 and 4 то есть seven', 'Latin')).toEqual({
      words: 6,
      inTarget: 4,
      score: 4 / 6,
    });
    expect(languageConsistency('3 + 4 = 7', 'Latin')).toEqual({
      words: 0,
      inTarget: 0,
      score: null,
    });
    // A word mixing scripts is not in the target language.
    expect(languageConsistency('helloмир', 'Latin').score).toBe(0);
    expect(languageConsistency('計算します', 'Hiragana').score).toBe(1);
    expect(languageConsistency('先加后减 then check', 'Han')).toEqual({
      words: 3,
      inTarget: 1,
      score: 1 / 3,
    });
  });

  it('scores the chain of thought only', () => {
    expect(
      languageConsistencyReward(
        '<think> add them, затем check </think> <answer> 7 </answer>',
        'Latin',
      ),
    ).toBeCloseTo(3 / 4, 12);
    expect(
      languageConsistencyReward('<think> 3 + 4 </think> <answer> seven </answer>', 'Latin'),
    ).toBe(null);
  });
});

describe('trainingProblems', () => {
  const run = { seed: 3, steps: 2, perStepPrompts: 2, evalPrompts: 40 };

  it("is the run's training stream, past its end too, never a held-out prompt", () => {
    const task = createTask('countdown', { numbers: 3, maxNumber: 10, maxTarget: 30 });
    const { train, eval: held } = trainEvalProblems(task, run.seed, 4, run.evalPrompts);
    const problems = trainingProblems(task, run, 300);
    expect(problems).toHaveLength(300);
    expect(problems.slice(0, 4)).toEqual(train);
    const heldOut = new Set(held.map((p) => p.question));
    expect(held).toHaveLength(40);
    expect(problems.filter((p) => heldOut.has(p.question))).toEqual([]);
    expect(new Set(problems.map((p) => p.id)).size).toBe(300);
    expect(() => trainingProblems(task, run, 0)).toThrow('prompts must be an integer ≥ 1');
  });

  it('gives each row of a dataset once, without its held-out rows', () => {
    const text = Array.from({ length: 10 }, (_, i) =>
      JSON.stringify({ prompt: `q${i}`, answer: `${i}` }),
    ).join('\n');
    const task = createTask('jsonl', {}, { text });
    const problems = trainingProblems(task, { ...run, evalPrompts: 3 }, 50);
    const held = trainEvalProblems(task, run.seed, 4, 3).eval;
    expect(problems).toHaveLength(7);
    expect(new Set(problems.map((p) => p.id)).size).toBe(7);
    expect(problems.some((p) => held.some((h) => h.id === p.id))).toBe(false);
  });
});

describe('rejectionFiles', () => {
  it('writes the kept set, every sample and the counts with the extra fields first', () => {
    const samples = [
      { problemId: 'a', prompt: 'P', completion: 'C1', length: 3, kept: true, reasons: [] },
      { problemId: 'a', prompt: 'P', completion: 'C2', length: 9, kept: false, reasons: ['wrong'] },
    ] as const;
    const report = {
      samples: samples.map((s) => ({ ...s, reasons: [...s.reasons] })),
      perPrompt: [{ problemId: 'a', sampled: 2, kept: 1 }],
      sampled: 2,
      kept: 1,
      yield: 0.5,
      reasons: { ...NO_REASONS, wrong: 1 },
    };
    const files = rejectionFiles(report, { step: 7 });
    expect(files['sft.jsonl']).toBe('{"prompt":"P","completion":"C1","problem_id":"a"}\n');
    expect(files['samples.jsonl'].split('\n')).toEqual([
      JSON.stringify(report.samples[0]),
      JSON.stringify(report.samples[1]),
      '',
    ]);
    const json = JSON.parse(files['report.json']);
    expect(Object.keys(json)).toEqual(['step', 'perPrompt', 'sampled', 'kept', 'yield', 'reasons']);
    expect(json).toMatchObject({ step: 7, sampled: 2, kept: 1, yield: 0.5 });
  });
});

const NO_REASONS = {
  wrong: 0,
  'no-answer': 0,
  unverifiable: 0,
  format: 0,
  truncated: 0,
  'too-short': 0,
  'too-long': 0,
  language: 0,
  duplicate: 0,
};
