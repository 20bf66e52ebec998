// `npm run plan` (src/cli/_plan.ts): the built-in public models carry their config.json numbers
// (parameter counts as published), the acceptance runs plan under their budgets with the micro-batch
// the plan chooses, a local folder's config.json is read, and JSON and text say the same peak.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { formatPlanReport, planCommand, planReportJson } from '../../src/cli/_plan';
import { parameterCount } from '../../src/core/model-config';
import { KNOWN_MODELS, knownModelConfig } from '../../src/model/known-models';

const GiB = 2 ** 30;
const ACCEPTANCE = [
  '--lora-r', '16', '--dtype', 'bf16', '--gradient-checkpointing', '--num-prompts', '1',
  '--num-generations', '8', '--max-prompt-length', '256', '--max-completion-length', '256',
]; // prettier-ignore

describe('built-in models', () => {
  it('have the parameter counts of the published checkpoints', () => {
    const counts = Object.fromEntries(
      KNOWN_MODELS.map((m) => [m.name, parameterCount(knownModelConfig(m))]),
    );
    expect(counts).toEqual({
      'smollm2-135m': 134_515_008,
      'smollm2-360m': 361_821_120,
      'qwen2.5-0.5b': 494_032_768,
      'qwen2.5-1.5b': 1_543_714_304,
      // Model card: 3.09B, 2.77B non-embedding (2,774,773,760 + the tied 151936 × 2048 table).
      'qwen2.5-3b': 3_085_938_688,
      // Qwen3's model cards: 0.44B / 1.4B / 3.6B non-embedding (tied: the embedding counts once).
      'qwen3-0.6b': 596_049_920,
      'qwen3-1.7b': 1_720_574_976,
      'qwen3-4b': 4_022_468_096,
      'llama-3.2-1b': 1_235_814_400,
      'llama-3.2-3b': 3_212_749_824, // model card: 3.21B
    });
  });
});

describe('planCommand', () => {
  it('qwen2.5-0.5b, LoRA r 16 + bf16 + checkpointing, B 1 × G 8, 256 + 256: under 2 GiB', () => {
    const r = planCommand(['qwen2.5-0.5b', ...ACCEPTANCE, '--json']);
    expect(r.plan.input.dtype).toBe('bfloat16');
    expect(r.plan.input.lora).toEqual({ r: 16, targetModules: ['all-linear'] });
    expect(r.plan.input.gradientCheckpointing).toBe(true);
    expect(r.microBatchChosen).toBe(true);
    expect(8 % r.microBatch).toBe(0);
    expect(r.budgetBytes).toBe(2 * GiB);
    expect(r.plan.peakBytes).toBeLessThan(2 * GiB);
    expect(r.plan.fits).toBe(true);
    const json = JSON.parse(planReportJson(r));
    expect(json.peakBytes).toBe(r.plan.peakBytes);
    expect(json.byCategory.reference).toBe(0);
  });

  it('qwen3-0.6b, the same run: under 3 GiB, its f32 KV cache (8 kv-heads of 128) the largest part after the weights', () => {
    const r = planCommand(['qwen3-0.6b', ...ACCEPTANCE, '--json']);
    expect(r.plan.input.config.architecture).toBe('Qwen3ForCausalLM');
    expect([r.microBatchChosen, r.budgetBytes]).toEqual([true, 3 * GiB]);
    expect(r.plan.peakBytes).toBeLessThan(3 * GiB);
    expect(r.plan.fits).toBe(true);
    // Printed for the record (docs/guide/models.md).
    const MiB = 2 ** 20;
    const by = r.plan.byCategory;
    console.log(
      `qwen3-0.6b peak ${(r.plan.peakBytes / GiB).toFixed(3)} GiB at micro-batch ${r.microBatch}: ` +
        `weights ${(by.parameters / MiB).toFixed(0)} MiB, sampling ${(by.sampling / MiB).toFixed(0)} MiB, ` +
        `training ${(by.training / MiB).toFixed(0)} MiB`,
    );
    // k and v of 8 sequences × 512 columns × 8 kv-heads × 128 × 28 layers in f32: 896 MiB.
    const kv = r.plan.buffers.find((b) => b.name === 'kv cache (k and v, per layer)');
    expect(kv && kv.bytes * kv.count).toBe(8 * 512 * 8 * 128 * 4 * 2 * 28);
    // The per-head norms keep q and k before them: one shared set under checkpointing.
    const qk = r.plan.buffers.find((b) => b.name.startsWith('q, k before q_norm / k_norm'));
    expect(qk?.shape).toEqual([r.microBatch * 512, (16 + 8) * 128]);
  });

  it('smollm2-135m under 1 GiB', () => {
    const r = planCommand(['smollm2-135m', ...ACCEPTANCE]);
    expect(r.plan.peakBytes).toBeLessThan(1 * GiB);
  });

  it('qwen2.5-1.5b under 4 GiB: the plan chooses one sequence per micro-batch', () => {
    const r = planCommand(['qwen2.5-1.5b', ...ACCEPTANCE, '--json']);
    expect([r.microBatchChosen, r.microBatch, r.budgetBytes]).toEqual([true, 1, 4 * GiB]);
    // Printed for the record (the memory table of docs/guide/models.md).
    console.log(`qwen2.5-1.5b peak at micro-batch 1: ${(r.plan.peakBytes / GiB).toFixed(3)} GiB`);
    expect(r.plan.peakBytes).toBeLessThan(4 * GiB);
    expect(r.plan.fits).toBe(true);
    // The group's 8 copies of the prompt are prefilled once: the sampler's scratch is 1 × 256 rows.
    const prefill = r.plan.buffers.find(
      (b) => b.name === 'decoder scratch: mlp gate, up, silu(gate)·up',
    );
    expect(prefill?.shape).toEqual([256, 8960]);
  });

  // Issue #37's acceptance: a 4-bit NF4 base (QLoRA) with the same run.
  const NF4 = ACCEPTANCE.map((a) => (a === 'bf16' ? 'nf4' : a));
  const nf4Plan = (model: string, ...extra: string[]) => {
    const r = planCommand([model, ...NF4, ...extra, '--json']);
    expect(r.plan.input.dtype).toBe('nf4');
    expect(r.plan.input.lora).toEqual({ r: 16, targetModules: ['all-linear'] });
    // Every projection is 4-bit codes + an f32 scale per 64 (0.5625 bytes a weight); the tied
    // embedding stays bf16; norms and biases f32.
    const config = r.plan.input.config;
    const embed = r.plan.buffers.find((b) => b.name === 'model.embed_tokens.weight');
    expect(embed?.bytes).toBe(config.vocabSize * config.hiddenSize * 2);
    const down = r.plan.buffers.find((b) => b.name === 'model.layers.0.mlp.down_proj.weight');
    const n = config.hiddenSize * config.intermediateSize;
    expect(down?.bytes).toBe(n / 2 + n / 16);
    // Printed for the record (the NF4 column of docs/guide/models.md).
    const MiB = 2 ** 20;
    console.log(
      `${model} ${extra.join(' ')} NF4 peak ${(r.plan.peakBytes / GiB).toFixed(3)} GiB at micro-batch ` +
        `${r.microBatch} (budget ${r.budgetBytes / GiB} GiB): ` +
        Object.entries(r.plan.byCategory)
          .filter(([, b]) => b > 0)
          .map(([k, b]) => `${k} ${(b / MiB).toFixed(1)} MiB`)
          .join(', '),
    );
    return r;
  };

  it('qwen2.5-3b, LoRA r 16 + NF4 base + checkpointing, B 1 × G 8, 256 + 256: under 4 GiB', () => {
    // One sequence at a time needs 3.42 GiB: the plan takes the 3.5 GiB step, micro-batch 1.
    const r = nf4Plan('qwen2.5-3b');
    expect([r.microBatchChosen, r.microBatch, r.budgetBytes]).toEqual([true, 1, 3.5 * GiB]);
    expect(r.plan.peakBytes).toBeLessThan(4 * GiB);
  });

  it('qwen2.5-1.5b, the same run: under 2.5 GiB (micro-batch 2)', () => {
    // Without --budget the plan fills the smallest budget step any micro-batch fits: 2 GiB does
    // not fit even one sequence (2.16 GiB), so it takes 2.5 GiB and the largest micro-batch there.
    const r = nf4Plan('qwen2.5-1.5b');
    expect([r.microBatch, r.budgetBytes, r.plan.fits]).toEqual([2, 2.5 * GiB, true]);
    expect(r.plan.peakBytes).toBeLessThan(2.5 * GiB);
    // With more room it takes more sequences at a time: 3 GiB holds 4.
    const roomier = nf4Plan('qwen2.5-1.5b', '--budget', '3');
    expect([roomier.microBatch, roomier.plan.fits]).toEqual([4, true]);
  });

  it('every built-in model plans with --dtype nf4, below its bf16 plan', () => {
    for (const m of KNOWN_MODELS) {
      const nf4 = planCommand([m.name, ...NF4, '--budget', '80']);
      const bf16 = planCommand([m.name, ...ACCEPTANCE, '--budget', '80']);
      expect(nf4.plan.input.dtype).toBe('nf4');
      expect(nf4.microBatch).toBe(bf16.microBatch);
      expect(nf4.plan.peakBytes).toBeLessThan(bf16.plan.peakBytes);
    }
    // --dtype nf4 alone means LoRA (with its defaults): a 4-bit base only trains adapters.
    const alone = planCommand(['qwen3-4b', '--dtype', 'nf4']);
    expect(alone.plan.input.lora?.r).toBeGreaterThan(0);
    expect(formatPlanReport(alone)).toContain('base nf4 (4-bit NF4 projections');
  });

  it("docs/guide/models.md's memory table is what the plan says, cell by cell", () => {
    const guide = readFileSync(new URL('../../docs/guide/models.md', import.meta.url), 'utf8');
    const section = guide.slice(guide.indexOf('### What fits where'));
    const rows = section
      .split('\n')
      .filter((line) => /^\| [A-Z][\w.-]+ +\| +[\d.]+ GiB/.test(line))
      .map((line) => line.split('|').map((cell) => cell.trim()));
    // One sequence per micro-batch (8 gradient-accumulation steps), each column's options.
    const run = ['--num-prompts', '1', '--num-generations', '8', '--max-prompt-length', '256'];
    const common = [...run, '--max-completion-length', '256', '--gradient-accumulation-steps', '8'];
    const columns = [
      [],
      ['--lora-r', '16', '--dtype', 'bf16'],
      ['--lora-r', '16', '--dtype', 'bf16', '--gradient-checkpointing'],
      ['--lora-r', '16', '--dtype', 'nf4', '--gradient-checkpointing'],
    ];
    // A row for every built-in model.
    expect(rows.map((r) => r[1].toLowerCase()).sort()).toEqual(
      KNOWN_MODELS.map((m) => m.name).sort(),
    );
    for (const row of rows) {
      const cells = columns.map((flags) => {
        const r = planCommand([row[1].toLowerCase(), ...flags, ...common]);
        return `${(r.plan.peakBytes / GiB).toFixed(2)} GiB`;
      });
      expect([row[1], ...cells]).toEqual(row.slice(1, 6));
    }
  });

  it("README.md's memory table (bf16 and NF4 bases) is what the plan says, cell by cell", () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    const rows = readme
      .split('\n')
      .filter((line) => /^\| [A-Z][\w.-]+ +\| +[\d.]+ GiB/.test(line))
      .map((line) => line.split('|').map((cell) => cell.trim()));
    expect(rows.length).toBeGreaterThanOrEqual(5);
    const common = ['--num-prompts', '1', '--num-generations', '8', '--max-prompt-length', '256'];
    const run = [...common, '--max-completion-length', '256', '--gradient-accumulation-steps', '8'];
    const lora = ['--lora-r', '16', '--gradient-checkpointing'];
    for (const row of rows) {
      const cells = ['bf16', 'nf4'].map((dtype) => {
        const r = planCommand([row[1].toLowerCase(), ...lora, '--dtype', dtype, ...run]);
        return `${(r.plan.peakBytes / GiB).toFixed(2)} GiB`;
      });
      expect([row[1], ...cells]).toEqual(row.slice(1, 4));
    }
  });

  it('a budget that does not fit lists what to change, in the text too', () => {
    const r = planCommand(['qwen2.5-0.5b', '--budget', '2']);
    expect(r.plan.input.lora).toBeNull();
    expect(r.plan.fits).toBe(false);
    expect(r.plan.suggestions[0]).toMatch(/^pick a smaller model or train LoRA adapters/);
    const text = formatPlanReport(r);
    expect(text).toContain('Does not fit in 2.00 GiB. What to change:');
    expect(text).toContain(`  - ${r.plan.suggestions[0]}`);
  });

  it('reads a local folder’s config.json (torch_dtype for dtype auto)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'grpo-plan-'));
    writeFileSync(
      join(dir, 'config.json'),
      JSON.stringify({
        architectures: ['LlamaForCausalLM'],
        hidden_size: 64,
        intermediate_size: 128,
        num_hidden_layers: 2,
        num_attention_heads: 4,
        num_key_value_heads: 2,
        vocab_size: 1000,
        max_position_embeddings: 512,
        torch_dtype: 'bfloat16',
      }),
    );
    const r = planCommand([dir, '--use-peft', '--dtype', 'auto']);
    expect(r.model.source).toBe('folder');
    expect(r.plan.input.dtype).toBe('bfloat16');
    expect(r.model.parameters).toBe(parameterCount(r.plan.input.config));
    expect(() => planCommand(['no-such-model'])).toThrow(/neither a built-in model/);
  });
});

describe('planCommand --sft', () => {
  it('plans an npm run sft run: no sampling, one packed batch of max-length sequences, QLoRA fitting a small GPU', () => {
    const args = ['--per-device-train-batch-size', '4', '--max-length', '512'];
    const full = planCommand(['qwen2.5-0.5b', '--sft', ...args]);
    expect(full.plan.input).toMatchObject({
      objective: 'sft',
      numPrompts: 4,
      groupSize: 1,
      promptLength: 1,
      completionLength: 511,
      lora: null,
    });
    expect(full.plan.byCategory.sampling).toBe(0);
    // Full fine-tune f32: 16 bytes per parameter before activations.
    expect(full.plan.peakBytes).toBeGreaterThan(16 * full.model.parameters);
    // QLoRA on a 3B model with checkpointing, 2 × 512 tokens a step: a 4 GiB GPU.
    const qlora = planCommand([
      ...['qwen2.5-3b', '--sft', '--per-device-train-batch-size', '2', '--max-length', '512'],
      ...['--dtype', 'nf4', '--lora-r', '16', '--gradient-checkpointing', 'true'],
    ]);
    expect(qlora.options).toMatchObject({ sft: true, usePeft: true, dtype: 'nf4' });
    expect(qlora.plan.input.lora).toEqual({ r: 16, targetModules: ['all-linear'] });
    expect(qlora.plan.peakBytes).toBeLessThan(4 * GiB);
    const text = formatPlanReport(qlora);
    expect(text).toContain('SFT: 2 sequences of 512 tokens per step (one packed batch)');
    expect(text).toMatch(/ {2}loss +[\d.]+ KiB {2}per-token buffers of one update/);
    expect(text).toContain('Fits in');
    // A GRPO run of the same model, batch and length would add the KV cache and sampling.
    const tight = planCommand(['qwen2.5-3b', '--sft', ...args, '--budget', '1']);
    expect(tight.plan.fits).toBe(false);
    expect(tight.plan.message).toMatch(
      /^Does not fit: a step of 4 examples of up to 1 \+ 511 tokens/,
    );
    expect(tight.plan.suggestions.join(' ')).toContain('train LoRA adapters');
    expect(() => planCommand(['qwen2.5-0.5b', '--sft', '--num-generations', '8'])).toThrow(
      "unknown argument '--num-generations'",
    );
    expect(() => planCommand(['qwen2.5-0.5b', '--sft', '--num-prompts', '2'])).toThrow(
      '--per-device-train-batch-size',
    );
  });
});
