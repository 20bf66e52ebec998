// Every ✓ and every explanatory sentence of Learn, walked over the settings grid μ 1/2 × β 0/0.04 ×
// each loss type × all-zero advantages or not × LoRA on/off (server-rendered, no browser). For each
// setting a step report is built from hand-set log-probs, with the trainer's per-pass numbers
// computed by the loss reference on the whole batch in f32 (as the GPU reports them), and the page
// must: set each pass's recomputation beside that same pass's trainer value, name the pass at μ > 1,
// print ✓ only between two numbers that agree within the stated tolerance, and show each note only
// where the numbers beside it make it true. A perturbed trainer value must turn its ✓ into ✗.
import { describe, expect, it } from 'vitest';
import { render } from 'svelte/server';
import LearnView from '../../src/app/learn/LearnView.svelte';
import { clipMarks, passChecks } from '../../src/app/learn/checks';
import {
  clipRegime,
  groupTeachesNothing,
  lossNote,
  NEAR_ZERO_SHARE,
  perTokenLoss,
  sumIsZeroByConstruction,
  tourUpdateText,
} from '../../src/app/learn/notes';
import { MATCH_TOLERANCE, matches } from '../../src/app/learn/derive';
import { computeAdvantages } from '../../src/grpo/advantages';
import { resolveConfig, type Config } from '../../src/grpo/config';
import type { CompletionRecord, PassRecord, StepReport } from '../../src/grpo/trainer';
import { grpoLossRef } from '../../src/ref/grpo_loss';

type LossType = 'grpo' | 'bnpo' | 'dr_grpo' | 'dapo' | 'cispo' | 'sapo';
interface Setting {
  mu: 1 | 2;
  beta: number;
  lossType: LossType;
  zeroAdvantages: boolean;
  lora: boolean;
}

const G = 4;
// Two groups; completion lengths differ so that token-weighted types do not cancel.
const REWARDS = [
  [1, 0, 0, 1],
  [0, 1, 0, 0],
];
const LENGTHS = [
  [5, 1, 2, 3],
  [2, 4, 1, 1],
];

function configOf(s: Setting): Config {
  return resolveConfig({
    rewards: ['format'],
    numGenerations: G,
    perStepPrompts: 2,
    numIterations: s.mu,
    beta: s.beta,
    lossType: s.lossType,
    usePeft: s.lora,
    maxCompletionLength: 8,
  });
}

/** Pass 2's log-prob of token t of completion i: moved with the advantage, some past 1 ± ε. */
const moved = (old: number, a: number, i: number, t: number) =>
  old + Math.sign(a) * (0.05 + 0.3 * ((i + t) % 3 === 0 ? 1 : 0));

function reportOf(s: Setting, config: Config): StepReport {
  const rewards = REWARDS.flat().map((r) => (s.zeroAdvantages ? 1 : r));
  const A = computeAdvantages(rewards, G, 'group');
  const completions: CompletionRecord[] = LENGTHS.flat().map((len, i) => {
    const old = Array.from({ length: len }, (_, t) => Math.fround(-0.4 - 0.3 * t - 0.05 * i));
    // At μ = 1 the only pass's old log-prob is its own (ρ ≡ 1); at μ = 2 pass 1 differs from the
    // sampler's by rounding.
    const logp = s.mu === 1 ? old.slice() : old.map((o) => Math.fround(o + 2e-7));
    return {
      text: `c${i}`,
      tokens: old.map((_, t) => 10 + t),
      truncated: false,
      reward: { total: rewards[i], perFunction: { format: rewards[i] }, errors: [] },
      advantage: A[i],
      reflects: false,
      logp,
      oldLogp: old,
      refLogp: s.beta > 0 ? old.map((o, t) => Math.fround(o + 0.1 * ((t % 2) - 0.5))) : null,
      counted: old.map(() => true),
      logpAfter: null,
      ...(s.mu === 2
        ? { laterPassLogp: [old.map((o, t) => Math.fround(moved(o, A[i], i, t)))] }
        : {}),
    };
  });
  // The trainer's numbers of each pass: the loss reference on the whole batch (one micro-batch),
  // rounded to f32 as the GPU's read-back is.
  const L = Math.max(...completions.map((c) => c.logp.length));
  const N = completions.length;
  const grid = (f: (c: CompletionRecord) => number[] | null) => {
    const out = new Float64Array(N * L);
    completions.forEach((c, i) => f(c)?.forEach((v, t) => (out[i * L + t] = v)));
    return out;
  };
  let active = 0;
  for (const c of completions) active += c.logp.length;
  const passLogp = (k: number) => (c: CompletionRecord) => (k === 0 ? c.logp : c.laterPassLogp![0]);
  const passes: PassRecord[] = Array.from({ length: s.mu }, (_, k) => {
    const r = grpoLossRef({
      logp: grid(passLogp(k)),
      oldLogp: grid((c) => c.oldLogp),
      refLogp: s.beta > 0 ? grid((c) => c.refLogp) : null,
      advantages: Float64Array.from(A),
      mask: grid((c) => c.logp.map(() => 1)),
      N,
      L,
      lossType: s.lossType,
      epsilonLow: config.epsilon,
      epsilonHigh: config.epsilonHigh,
      beta: s.beta,
      maxCompletionLength: config.maxCompletionLength,
      activeTokensInBatch: active,
      sapoTemperaturePos: config.sapoTemperaturePos,
      sapoTemperatureNeg: config.sapoTemperatureNeg,
    });
    return {
      loss: Math.fround(r.loss),
      clipRatioLow: Math.fround(r.stats.clipRatioLow),
      clipRatioHigh: Math.fround(r.stats.clipRatioHigh),
      clipRatioRegion: Math.fround(r.stats.clipRatioRegion),
      kl: s.beta > 0 ? Math.fround(r.stats.meanKl) : null,
      gradNorm: 0.5,
      learningRate: 1e-6,
    };
  });
  const mean = (f: (p: PassRecord) => number) => passes.reduce((t, p) => t + f(p), 0) / s.mu;
  return {
    step: 3,
    skipped: null,
    passes,
    groups: REWARDS.map((_, b) => ({
      problem: {
        id: `p${b}`,
        task: 't',
        question: 'q',
        reference: null,
        verifier: { kind: 'none' },
      },
      prompt: 'User: q. Assistant:',
      promptTokens: 5,
      completions: completions.slice(b * G, (b + 1) * G),
    })),
    metrics: {
      reward: 0.5,
      // TRL's logged row over the μ passes (docs/grpo.md §6): not any one pass's value at μ = 2.
      loss: mean((p) => p.loss),
      grad_norm: 0.5,
      learning_rate: 1e-6,
      entropy: 1,
      'clip_ratio/low_mean': mean((p) => p.clipRatioLow),
      'clip_ratio/high_mean': mean((p) => p.clipRatioHigh),
      'clip_ratio/region_mean': mean((p) => p.clipRatioRegion),
      ...(s.beta > 0 ? { kl: mean((p) => p.kl!) } : {}),
      'first_pass/loss': passes[0].loss,
      'first_pass/clip_ratio/region_mean': passes[0].clipRatioRegion,
    },
  };
}

/** The visible text of each check line in the rendered page, with its data attributes. */
function checkLines(body: string) {
  const out: { key: string; pass: number; of: number; text: string }[] = [];
  const re = /<li[^>]*data-testid="check-line"[^>]*>([\s\S]*?)<\/li>/g;
  for (const match of body.matchAll(re)) {
    const open = match[0].slice(0, match[0].indexOf('>'));
    const get = (name: string) => new RegExp(`${name}="([^"]*)"`).exec(open)?.[1] ?? '';
    out.push({
      key: get('data-key'),
      pass: Number(get('data-pass')),
      of: Number(get('data-of')),
      text: match[1]
        .replace(/<[^>]*>/g, '')
        .replace(/\s+/g, ' ')
        .trim(),
    });
  }
  return out;
}

/** A printed number: "−0.123456" (U+2212 minus) or "1.25%". */
function parse(s: string): number {
  const pct = s.endsWith('%');
  const v = Number(s.replace(/−/g, '-').replace('%', ''));
  return pct ? v / 100 : v;
}

/** The two numbers printed either side of a check line's verdict, or null when it has none. */
function printedPair(text: string): [number, number] | null {
  const m = /trainer ([−\d.e+%-]+) · recomputed ([−\d.e+%-]+) [✓✗]/.exec(text);
  return m ? [parse(m[1]), parse(m[2])] : null;
}

/** The text of the element with this data-testid (tags dropped, whitespace collapsed). */
function textOf(body: string, testid: string): string | null {
  const start = body.indexOf(`data-testid="${testid}"`);
  if (start < 0) return null;
  const end = body.indexOf('</p>', start);
  return body
    .slice(body.indexOf('>', start) + 1, end)
    .replace(/<[^>]*>/g, '')
    .replace(/\s+/g, ' ')
    .trim();
}

const SETTINGS: Setting[] = [];
for (const mu of [1, 2] as const)
  for (const beta of [0, 0.04])
    for (const lossType of ['grpo', 'bnpo', 'dr_grpo', 'dapo', 'cispo', 'sapo'] as const)
      for (const zeroAdvantages of [false, true])
        for (const lora of [false, true])
          SETTINGS.push({ mu, beta, lossType, zeroAdvantages, lora });

const name = (s: Setting) =>
  `μ=${s.mu} β=${s.beta} ${s.lossType}${s.zeroAdvantages ? ' A≡0' : ''}${s.lora ? ' LoRA' : ''}`;

describe('Learn: every ✓ and every sentence, on every setting', () => {
  it.each(SETTINGS.map((s) => [name(s), s] as const))('%s', (_, s) => {
    const config = configOf(s);
    const report = reportOf(s, config);
    const checks = passChecks(report, config);

    // Like with like: one check per pass, the pass named at μ > 1, each line's verdict is
    // `matches` of exactly the two numbers it carries, and here every pass matches.
    expect(checks.map((c) => c.name)).toEqual(s.mu === 1 ? [''] : ['pass 1 of 2', 'pass 2 of 2']);
    checks.forEach((pc, k) => {
      expect(pc.lines.map((l) => l.key)).toEqual(
        s.beta > 0 ? ['loss', 'clip', 'kl'] : ['loss', 'clip'],
      );
      expect(pc.lines[0].trainer).toBe(report.passes![k].loss);
      for (const l of pc.lines) {
        expect(l.recomputed).not.toBeNull();
        expect(l.ok).toBe(matches(l.recomputed!, l.trainer));
        expect(l.ok, `${pc.name} ${l.label}`).toBe(true);
      }
    });

    const { body } = render(LearnView, { props: { report, config, history: [] } });
    const lines = checkLines(body);
    // Each pass's lines in the update section, its clip line again beside the clip plot, its kl
    // line in the KL section.
    expect(lines.length).toBe(s.mu * (s.beta > 0 ? 3 + 2 : 2 + 1));
    for (const l of lines) {
      if (s.mu === 2) expect(l.text).toContain(`pass ${l.pass} of 2`);
      else expect(l.text).not.toMatch(/pass \d of/);
      const pair = printedPair(l.text);
      expect(pair, l.text).not.toBeNull();
      // The printed numbers agree within the tolerance (plus the rounding of the print).
      const [trainer, recomputed] = pair!;
      const printSlack = l.key === 'clip' ? 5e-5 : 1e-6;
      expect(Math.abs(trainer - recomputed), l.text).toBeLessThanOrEqual(
        MATCH_TOLERANCE.atol + MATCH_TOLERANCE.rtol * Math.abs(trainer) + printSlack,
      );
      expect(l.text).toContain('✓');
    }
    // No ✓ anywhere sits beside the logged (averaged) loss.
    expect(body).not.toMatch(/mean of the 2 passes[^✓]{0,200}✓/);
    if (s.mu === 2) expect(textOf(body, 'logged-note')).toContain('mean of the 2 passes’ losses');
    else expect(textOf(body, 'logged-note')).toBeNull();

    // The clip notes: "nothing can be clipped" only where ρ ≡ 1 and no cap sits below 1.
    const regime = clipRegime(config);
    const noClip = textOf(body, 'no-clip-note');
    if (regime === 'single-pass') {
      expect(s.mu).toBe(1);
      expect(noClip).toContain('No token can be clipped');
      // The trainer's clip ratio it quotes is 0, as the sentence says.
      expect(report.passes![0].clipRatioRegion).toBe(0);
      expect(noClip).toContain('clip ratio: 0.0%');
    } else {
      expect(noClip).toBeNull();
    }
    expect(textOf(body, 'clip-passes') !== null).toBe(regime === 'passes');
    expect(textOf(body, 'clip-cispo') !== null).toBe(regime === 'cispo-cap');
    if (regime === 'cispo-cap' && !s.zeroAdvantages)
      expect(report.passes![0].clipRatioHigh).toBeGreaterThan(0);
    expect(textOf(body, 'clip-sapo') !== null).toBe(regime === 'no-clip');
    if (regime === 'no-clip') for (const p of report.passes!) expect(p.clipRatioRegion).toBe(0);

    // The loss note: only where ℓ = −A holds (μ = 1, a clipped-surrogate type), and it says
    // "near 0" only when the policy term is under 5% of mean |A|.
    const note = lossNote(report, config);
    const noteText = textOf(body, 'loss-note');
    if (s.mu === 2 || s.lossType === 'cispo' || s.lossType === 'sapo') {
      expect(note).toBeNull();
      expect(noteText).toBeNull();
    } else {
      expect(note).not.toBeNull();
      // The note's decomposition adds up to the trainer's loss of the pass.
      expect(matches(note!.loss, report.passes![0].loss)).toBe(true);
      if (s.zeroAdvantages) {
        expect(note!.kind).toBe('no-signal');
        expect(noteText).toContain('every advantage of this step is 0');
      } else if (Math.abs(note!.policy) <= NEAR_ZERO_SHARE * note!.scale) {
        expect(note!.kind).toBe('near-zero');
        expect(noteText).toContain('Why the loss is near 0');
      } else {
        expect(note!.kind).toBe('not-near-zero');
        expect(noteText).toContain('Why the loss is not near 0');
        expect(noteText).not.toContain('Why the loss is near 0');
      }
      // grpo averages per completion and these groups' advantages sum to 0: the policy term
      // cancels; the token-weighted types do not cancel on these lengths.
      if (!s.zeroAdvantages)
        expect(note!.kind).toBe(s.lossType === 'grpo' ? 'near-zero' : 'not-near-zero');
    }

    // The update names the run's own per-token loss; a tied group is called signal-free only
    // when its advantages are 0; Σ A ≈ 0 "by construction" holds for group scaling.
    expect(body).toContain(perTokenLoss(config));
    expect(textOf(body, 'group-no-signal') !== null).toBe(s.zeroAdvantages);
    expect(body).toContain('(≈ 0 by construction');
    // KL: its text only with β > 0; the β = 0 note names what this run's reference would be.
    const noKl = textOf(body, 'no-kl-note');
    if (s.beta > 0) expect(noKl).toBeNull();
    else {
      expect(noKl).toContain('No KL is computed');
      expect(noKl).toContain(s.lora ? 'adapters switched off' : 'not even loaded');
      expect(noKl).not.toContain(s.lora ? 'not even loaded' : 'adapters switched off');
    }
  });

  it('a trainer value that differs from its pass gets ✗, never ✓', () => {
    const s: Setting = { mu: 2, beta: 0.04, lossType: 'dapo', zeroAdvantages: false, lora: false };
    const config = configOf(s);
    const report = reportOf(s, config);
    report.passes![1] = { ...report.passes![1], loss: report.passes![1].loss + 0.01 };
    const checks = passChecks(report, config);
    expect(checks[0].lines[0].ok).toBe(true);
    expect(checks[1].lines[0].ok).toBe(false);
    const { body } = render(LearnView, { props: { report, config, history: [] } });
    const bad = checkLines(body).filter((l) => l.key === 'loss' && l.pass === 2);
    expect(bad).toHaveLength(1);
    expect(bad[0].text).toContain('✗ differs from the trainer');
    expect(bad[0].text).not.toContain('✓');
  });

  it('the issue’s μ = 2 case: pass 1 is compared with pass 1, not with the two-pass mean', () => {
    // The logged loss averages both passes; the old page set pass 1's recomputation beside it.
    const s: Setting = { mu: 2, beta: 0, lossType: 'dapo', zeroAdvantages: false, lora: false };
    const config = configOf(s);
    const report = reportOf(s, config);
    const [p1, p2] = report.passes!;
    expect(matches(p1.loss, report.metrics.loss)).toBe(false);
    expect(p2.clipRatioRegion).toBeGreaterThan(0);
    const checks = passChecks(report, config);
    expect(checks[0].lines[0].trainer).toBe(p1.loss);
    expect(checks[1].lines[1].trainer).toBe(p2.clipRatioRegion);
    expect(checks[1].lines[1].recomputed).toBeCloseTo(p2.clipRatioRegion, 6);
  });

  it('a report without per-pass records compares with first_pass/* alone', () => {
    const s: Setting = { mu: 2, beta: 0, lossType: 'bnpo', zeroAdvantages: false, lora: false };
    const config = configOf(s);
    const report = reportOf(s, config);
    delete report.passes;
    const checks = passChecks(report, config);
    expect(checks).toHaveLength(1);
    expect(checks[0].name).toBe('pass 1 of 2');
    expect(checks[0].lines[0].trainer).toBe(report.metrics['first_pass/loss']);
    expect(checks[0].lines.every((l) => l.ok)).toBe(true);
  });

  it('Inspect’s Clipped marks: pass μ’s clipped tokens at μ > 1, checked against that pass', () => {
    const s: Setting = { mu: 2, beta: 0, lossType: 'dapo', zeroAdvantages: false, lora: false };
    const config = configOf(s);
    const report = reportOf(s, config);
    const marks = clipMarks(report, config);
    expect(marks.source).toBe('pass');
    expect([marks.pass, marks.of]).toEqual([2, 2]);
    expect(marks.counted).toBe(LENGTHS.flat().reduce((a, b) => a + b, 0));
    expect(marks.clipped).toBeGreaterThan(0);
    expect(marks.trainer).toBe(report.passes![1].clipRatioRegion);
    expect(marks.ok).toBe(true);
    expect(marks.clipped / marks.counted).toBeCloseTo(report.passes![1].clipRatioRegion, 6);
    // The marks are per token: the sum of the 1s is the count.
    const ones = marks.values.flat(2).filter((v) => v === 1).length;
    expect(ones).toBe(marks.clipped);
    // A trainer value that is not the marks' share: ✗.
    report.passes![1] = { ...report.passes![1], clipRatioRegion: 0.9 };
    expect(clipMarks(report, config).ok).toBe(false);
    // μ = 1: no later pass; without log-probs after the update nothing is marked.
    const one = { ...s, mu: 1 as const };
    const c1 = configOf(one);
    const r1 = reportOf(one, c1);
    expect(clipMarks(r1, c1)).toMatchObject({
      source: 'none',
      clipped: 0,
      trainer: null,
      ok: null,
    });
    for (const g of r1.groups)
      for (const c of g.completions) c.logpAfter = c.logp.map((v) => v + 1);
    expect(clipMarks(r1, c1)).toMatchObject({ source: 'after', trainer: null });
    expect(clipMarks(r1, c1).clipped).toBeGreaterThan(0);
  });

  it('GDPO: a tied group is not called signal-free, nor its Σ A zero by construction', () => {
    // normalize_then_sum re-normalises over the batch (docs/grpo.md §2): a tied group can get
    // A ≠ 0 and a non-zero sum.
    const tied = {
      scale: 'group',
      allEqual: true,
      sum: 1.2,
      rows: [0.3, 0.3, 0.3, 0.3].map((reported) => ({ reported })),
    };
    expect(groupTeachesNothing(tied)).toBe(false);
    expect(
      groupTeachesNothing({ ...tied, sum: 0, rows: tied.rows.map(() => ({ reported: 0 })) }),
    ).toBe(true);
    expect(
      sumIsZeroByConstruction(
        { ...tied, sum: 0 },
        { multiObjectiveAggregation: 'normalize_then_sum' },
      ),
    ).toBe(false);
    expect(
      sumIsZeroByConstruction(
        { ...tied, sum: 0 },
        { multiObjectiveAggregation: 'sum_then_normalize' },
      ),
    ).toBe(true);
    expect(sumIsZeroByConstruction(tied, {})).toBe(false);
    expect(perTokenLoss({ lossType: 'sapo', beta: 0 })).toBe(
      'ℓ = −A·(4/τ)·σ(τ(ρ − 1)) (β = 0: no KL term)',
    );
    expect(perTokenLoss({ lossType: 'dapo', beta: 0.04 })).toBe('ℓ = −min(ρA, clip(ρ)A) + β·k3');
  });

  it('the tour’s update stop says what the current μ, ε and β do', () => {
    const base = { epsilon: 0.2, epsilonHigh: 0.28, lossType: 'dapo' as const };
    const one = tourUpdateText({ ...base, numIterations: 1, beta: 0 });
    expect(one).toContain('nothing is clipped');
    expect(one).toContain('ε = 0.2 / 0.28');
    expect(one).toContain('no KL penalty');
    expect(one).not.toContain('KL and grad norm');
    const two = tourUpdateText({ ...base, numIterations: 2, beta: 0.001 });
    expect(two).toContain('μ = 2 passes');
    expect(two).toContain('[1 − 0.2, 1 + 0.28]');
    expect(two).not.toContain('nothing is clipped');
    expect(two).toContain('β = 0.001');
    expect(tourUpdateText({ ...base, numIterations: 2, beta: 0, lossType: 'sapo' })).toContain(
      'SAPO has no clip',
    );
  });
});
