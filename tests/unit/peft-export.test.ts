// LoRA exports (src/export/peft-adapter.ts) on the CPU reference: the merged HF folder, loaded back
// with the project's loader, computes the adapter forward (logits to f32 rounding); the merged ONNX
// graph holds the same weights; the PEFT adapter folder has PEFT's key set, tensor names and shapes,
// and reads back exactly; a bad adapter folder fails naming the key or tensor. A PyTorch check
// (skipped with its reason where /usr/bin/python3 has no torch, as in CI) re-implements PEFT's
// forward from the exported files and the merged folder's forward, and both equal ours.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parameterSpecs, parseHfConfig, type LlamaConfig } from '../../src/core/model-config';
import { exportHfFolder } from '../../src/export/hf-export';
import { exportOnnx } from '../../src/export/onnx-export';
import {
  exportPeftAdapter,
  loadPeftAdapter,
  loraConfigFields,
  mergeLoraWeights,
  parsePeftAdapter,
  PEFT_CONFIG_FILE,
  PEFT_KEY_PREFIX,
  PEFT_WEIGHTS_FILE,
  PeftConfigError,
  type LoraWeights,
} from '../../src/export/peft-adapter';
import { ModelFileError } from '../../src/formats/errors';
import { loadHfFolder } from '../../src/formats/hf-folder';
import { filesSource } from '../../src/formats/model-source';
import { parseSafetensors, writeSafetensors } from '../../src/formats/safetensors';
import { resolveConfig } from '../../src/grpo/config';
import { RefLlama } from '../../src/ref/llama';
import { loraAdapterSpecs, type LoraOptions } from '../../src/core/lora';

// Merged (f32 W + s·B·A, rounded once) against the adapter forward in f64 over f32 inputs: the
// only difference is the rounding of each merged weight (≤ 2^-24 relative), carried through two
// layers; measured ≤ 2.4e-7 on these logits.
const MERGED_TOLERANCE = { atol: 1e-5, rtol: 1e-5 };
// torch float64 against our f64 reference in another summation order: measured ≤ 1.4e-15.
const TORCH_TOLERANCE = { atol: 1e-9, rtol: 1e-9 };

const qwen = parseHfConfig({
  architectures: ['Qwen2ForCausalLM'], // q/k/v biases: merged exports leave them untouched
  hidden_size: 12,
  intermediate_size: 20,
  num_hidden_layers: 2,
  num_attention_heads: 3,
  num_key_value_heads: 1,
  head_dim: 4,
  vocab_size: 40,
  max_position_embeddings: 32,
  tie_word_embeddings: false,
  rope_theta: 10000,
  rms_norm_eps: 1e-6,
  bos_token_id: null,
  eos_token_id: 2,
});

function lcg(seed: number) {
  let s = seed;
  return () => {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    return s / 2 ** 31 - 0.5;
  };
}

function randomWeights(config: LlamaConfig, seed = 7) {
  const next = lcg(seed);
  const out = new Map<string, Float32Array>();
  for (const spec of parameterSpecs(config)) {
    const data = new Float32Array(spec.shape.reduce((a, b) => a * b, 1));
    const norm = spec.name.endsWith('norm.weight');
    for (let i = 0; i < data.length; i++) data[i] = norm ? 1 + 0.1 * next() : 0.6 * next();
    out.set(spec.name, data);
  }
  return out;
}

/** Adapters with non-zero A and B (a trained adapter, not PEFT's B = 0 start). */
function randomLora(config: LlamaConfig, options: LoraOptions, seed = 11): LoraWeights {
  const next = lcg(seed);
  const adapters = new Map<string, Float32Array>();
  for (const spec of loraAdapterSpecs(config, options)) {
    const data = new Float32Array(spec.shape[0] * spec.shape[1]);
    for (let i = 0; i < data.length; i++) data[i] = 0.5 * next();
    adapters.set(spec.name, data);
  }
  return { options, adapters };
}

const LORA: LoraOptions = {
  r: 3,
  alpha: 5,
  targetModules: 'all-linear',
  useRslora: false,
  dropout: 0,
};

const tokens = Uint32Array.from([1, 5, 9, 3, 7, 2, 30, 4, 11, 0, 39, 6]); // (N = 2, T = 6)
const N = 2;
const T = 6;
const keyStart = new Uint32Array(N);

function expectClose(
  actual: ArrayLike<number>,
  expected: ArrayLike<number>,
  tol: typeof MERGED_TOLERANCE,
) {
  expect(actual.length).toBe(expected.length);
  let worst = 0;
  for (let i = 0; i < actual.length; i++) {
    const excess =
      Math.abs(actual[i] - expected[i]) - (tol.atol + tol.rtol * Math.abs(expected[i]));
    worst = Math.max(worst, excess);
  }
  expect(worst).toBeLessThanOrEqual(0);
}

const load = (files: Map<string, Uint8Array>) =>
  loadHfFolder(filesSource([...files].map(([name, bytes]) => new File([bytes.slice()], name))));
const tokenizerFiles = new Map([
  ['tokenizer.json', new TextEncoder().encode('{}')], // copied, never parsed by the loader here
]);

describe('merged LoRA export', () => {
  for (const useRslora of [false, true]) {
    it(`the merged HF folder computes the adapter forward (rslora ${useRslora})`, async () => {
      const base = randomWeights(qwen);
      const lora = randomLora(qwen, { ...LORA, useRslora });
      const adapted = new RefLlama(qwen, base, lora).forward(tokens, N, T, keyStart).logits;
      const plain = new RefLlama(qwen, base).forward(tokens, N, T, keyStart).logits;

      const files = exportHfFolder({ config: qwen, tensors: base, lora, tokenizerFiles });
      const loaded = await load(files);
      const merged = new RefLlama(loaded.config, loaded.tensors).forward(tokens, N, T, keyStart);
      expectClose(merged.logits, adapted, MERGED_TOLERANCE);
      // The adapters matter here: the base model's logits are far from the adapted ones.
      let gap = 0;
      for (let i = 0; i < plain.length; i++) gap = Math.max(gap, Math.abs(plain[i] - adapted[i]));
      expect(gap).toBeGreaterThan(0.05);
      // Only the adapted projections' weights change; biases, norms and embeddings are the base's.
      for (const [name, data] of base) {
        const out = loaded.tensors.get(name)!;
        if (/_proj\.weight$/.test(name)) expect(out).not.toEqual(data);
        else expect(out).toEqual(data);
      }
    });
  }

  it('targets only the chosen projections; ONNX holds the same merged weights', () => {
    const base = randomWeights(qwen);
    const lora = randomLora(qwen, { ...LORA, targetModules: ['v_proj', 'down_proj'] });
    const merged = mergeLoraWeights(qwen, base, lora);
    for (const [name, data] of base) {
      const changed = /(v_proj|down_proj)\.weight$/.test(name);
      if (changed) expect(merged.get(name)).not.toEqual(data);
      else expect(merged.get(name)).toBe(data);
    }
    // W + s·B·A, entry by entry, in f64 (s = α / r).
    const path = 'model.layers.1.mlp.down_proj';
    const A = lora.adapters.get(`${path}.lora_A.weight`)!; // (r, I)
    const B = lora.adapters.get(`${path}.lora_B.weight`)!; // (C, r)
    const W = base.get(`${path}.weight`)!;
    const [C, I, r, s] = [qwen.hiddenSize, qwen.intermediateSize, 3, 5 / 3];
    for (const [o, i] of [
      [0, 0],
      [C - 1, I - 1],
      [4, 7],
    ]) {
      let ba = 0;
      for (let k = 0; k < r; k++) ba += B[o * r + k] * A[k * I + i];
      expect(merged.get(`${path}.weight`)![o * I + i]).toBe(Math.fround(W[o * I + i] + s * ba));
    }
    expect(exportOnnx({ config: qwen, tensors: base, lora })).toEqual(
      exportOnnx({ config: qwen, tensors: merged }),
    );
  });
});

/** LoraConfig's keys as PEFT (≥ 0.10) saves them in adapter_config.json. */
const PEFT_KEYS = [
  'alpha_pattern',
  'auto_mapping',
  'base_model_name_or_path',
  'bias',
  'fan_in_fan_out',
  'inference_mode',
  'init_lora_weights',
  'layer_replication',
  'layers_pattern',
  'layers_to_transform',
  'loftq_config',
  'lora_alpha',
  'lora_dropout',
  'megatron_config',
  'megatron_core',
  'modules_to_save',
  'peft_type',
  'r',
  'rank_pattern',
  'revision',
  'target_modules',
  'task_type',
  'use_dora',
  'use_rslora',
];

const json = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));
const configOf = (files: Map<string, Uint8Array>) =>
  JSON.parse(new TextDecoder().decode(files.get(PEFT_CONFIG_FILE))) as Record<string, unknown>;

describe('PEFT adapter folder', () => {
  const lora = randomLora(qwen, { ...LORA, targetModules: ['q_proj', 'v_proj', 'up_proj'] });
  const files = exportPeftAdapter({ config: qwen, lora, baseModelNameOrPath: 'Qwen/tiny' });

  it("has PEFT's config keys, tensor names and shapes", () => {
    expect([...files.keys()]).toEqual([PEFT_CONFIG_FILE, PEFT_WEIGHTS_FILE]);
    const config = configOf(files);
    expect(Object.keys(config).sort()).toEqual(PEFT_KEYS);
    expect(config).toMatchObject({
      peft_type: 'LORA',
      task_type: 'CAUSAL_LM',
      r: 3,
      lora_alpha: 5,
      lora_dropout: 0,
      target_modules: ['q_proj', 'v_proj', 'up_proj'],
      use_rslora: false,
      use_dora: false,
      bias: 'none',
      fan_in_fan_out: false,
      inference_mode: true,
      base_model_name_or_path: 'Qwen/tiny',
      modules_to_save: null,
    });
    const { metadata, tensors } = parseSafetensors(files.get(PEFT_WEIGHTS_FILE)!, 'x');
    expect(metadata).toEqual({ format: 'pt' });
    const C = qwen.hiddenSize;
    const expected: [string, number[]][] = [];
    for (let l = 0; l < 2; l++) {
      const p = `base_model.model.model.layers.${l}`;
      expected.push(
        [`${p}.self_attn.q_proj.lora_A.weight`, [3, C]],
        [`${p}.self_attn.q_proj.lora_B.weight`, [3 * 4, 3]],
        [`${p}.self_attn.v_proj.lora_A.weight`, [3, C]],
        [`${p}.self_attn.v_proj.lora_B.weight`, [1 * 4, 3]],
        [`${p}.mlp.up_proj.lora_A.weight`, [3, C]],
        [`${p}.mlp.up_proj.lora_B.weight`, [20, 3]],
      );
    }
    expect([...tensors].map(([name, t]) => [name, t.shape])).toEqual(expected);
    for (const [name, t] of tensors) {
      expect(t.dtype).toBe('F32');
      expect(t.data).toEqual(lora.adapters.get(name.slice(PEFT_KEY_PREFIX.length)));
    }
    // 'all-linear' is saved as the explicit list, as PEFT saves the modules it resolved.
    const all = exportPeftAdapter({ config: qwen, lora: randomLora(qwen, LORA) });
    expect(configOf(all).target_modules).toEqual([
      'q_proj',
      'k_proj',
      'v_proj',
      'o_proj',
      'gate_proj',
      'up_proj',
      'down_proj',
    ]);
  });

  it('reads back exactly, from bytes and from a folder source', async () => {
    const parsed = parsePeftAdapter(
      { config: files.get(PEFT_CONFIG_FILE)!, weights: files.get(PEFT_WEIGHTS_FILE)! },
      qwen,
    );
    expect(parsed.options).toEqual({
      ...lora.options,
      targetModules: ['q_proj', 'v_proj', 'up_proj'],
    });
    expect(parsed.adapters).toEqual(lora.adapters);
    expect(parsed.baseModelNameOrPath).toBe('Qwen/tiny');
    const source = filesSource([...files].map(([name, bytes]) => new File([bytes.slice()], name)));
    expect((await loadPeftAdapter(source, qwen)).adapters).toEqual(lora.adapters);
    // The run config it implies is a valid config (usePeft with the adapter's settings).
    const run = resolveConfig(loraConfigFields(parsed.options));
    expect(run).toMatchObject({
      usePeft: true,
      loraR: 3,
      loraAlpha: 5,
      useRslora: false,
      loraTargetModules: ['q_proj', 'v_proj', 'up_proj'],
    });
  });

  it('refuses configs and tensors this LoRA does not compute, naming the key or tensor', () => {
    const good = configOf(files);
    const weights = files.get(PEFT_WEIGHTS_FILE)!;
    const attempt = (config: Record<string, unknown>, w = weights) =>
      parsePeftAdapter({ config: json(config), weights: w }, qwen);
    const keyError = (patch: Record<string, unknown>, key: string, text: string | RegExp) => {
      let err: unknown = null;
      try {
        attempt({ ...good, ...patch });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(PeftConfigError);
      expect((err as PeftConfigError).key).toBe(key);
      expect((err as Error).message).toMatch(text);
      expect((err as Error).message).toContain(`${PEFT_CONFIG_FILE}: '${key}'`);
    };
    keyError({ peft_type: 'LOHA' }, 'peft_type', /"LORA"/);
    keyError({ r: 0 }, 'r', /integer/);
    keyError({ r: 2.5 }, 'r', /integer/);
    keyError({ lora_alpha: 'big' }, 'lora_alpha', /number/);
    keyError({ use_dora: true }, 'use_dora', /DoRA/);
    keyError({ bias: 'all' }, 'bias', /none/);
    keyError({ rank_pattern: { q_proj: 8 } }, 'rank_pattern', /one rank/);
    keyError({ modules_to_save: ['lm_head'] }, 'modules_to_save', /empty/);
    keyError({ layers_to_transform: [0] }, 'layers_to_transform', /every layer/);
    keyError({ target_modules: '.*q_proj' }, 'target_modules', /pattern/);
    keyError({ target_modules: ['q_proj', 'lm_head'] }, 'target_modules', /'lm_head'/);
    keyError({ target_modules: ['mlp.q_proj'] }, 'target_modules', /'mlp.q_proj'/);
    keyError({ task_type: 'SEQ_CLS' }, 'task_type', /CAUSAL_LM/);
    // Suffix names as PEFT matches them are the same projections.
    expect(
      attempt({ ...good, target_modules: ['self_attn.q_proj', 'v_proj', 'mlp.up_proj'] }).options
        .targetModules,
    ).toEqual(['q_proj', 'v_proj', 'up_proj']);
    // Training dropout does not change the adapter's function; a continued run trains without it.
    expect(attempt({ ...good, lora_dropout: 0.05 }).options.dropout).toBe(0);

    // Tensors: r = 2 in the config against r = 3 tensors, a missing one, an extra one.
    const first = `${PEFT_KEY_PREFIX}model.layers.0.self_attn.q_proj.lora_A.weight`;
    expect(() => attempt({ ...good, r: 2 })).toThrow(
      new RegExp(`tensor '${first.replace(/\./g, '\\.')}'.*expected \\[2, 12\\]`),
    );
    const { tensors } = parseSafetensors(weights, 'x');
    const rewrite = (
      edit: (list: { name: string; shape: number[]; data: Float32Array }[]) => void,
    ) => {
      const list = [...tensors].map(([name, t]) => ({ name, shape: t.shape, data: t.data }));
      edit(list);
      return writeSafetensors(list);
    };
    const missing = rewrite((list) => list.splice(0, 1));
    expect(() => attempt(good, missing)).toThrow(/missing adapter tensor/);
    expect(() => attempt(good, missing)).toThrow(ModelFileError);
    const extra = rewrite((list) =>
      list.push({
        name: `${PEFT_KEY_PREFIX}lm_head.lora_A.weight`,
        shape: [3, 12],
        data: new Float32Array(36),
      }),
    );
    expect(() => attempt(good, extra)).toThrow(/lm_head\.lora_A\.weight.*unexpected tensor/);
    const unprefixed = rewrite(
      (list) => (list[0].name = list[0].name.slice(PEFT_KEY_PREFIX.length)),
    );
    expect(() => attempt(good, unprefixed)).toThrow(/not a PEFT adapter key/);
    const nan = rewrite((list) => (list[1].data = list[1].data.map((v, i) => (i ? v : NaN))));
    expect(() => attempt(good, nan)).toThrow(/non-finite/);
  });
});

/** /usr/bin/python3 with torch, or why not (CI installs no python3-torch). */
function torchPython(): { python: string } | { skip: string } {
  const python = process.env.TORCH_PYTHON ?? '/usr/bin/python3';
  const probe = spawnSync(python, ['-c', 'import torch'], { encoding: 'utf8' });
  if (probe.error) return { skip: `${python} not found (${probe.error.message})` };
  if (probe.status !== 0)
    return { skip: `${python} has no torch (${probe.stderr.trim().split('\n').pop()})` };
  return { python };
}

const torch = torchPython();
if ('skip' in torch) {
  console.warn(`peft-export.test.ts: the PyTorch check is skipped: ${torch.skip}`);
}

describe('PyTorch reads the exported files', () => {
  it.skipIf('skip' in torch)(
    `PEFT's forward from adapter_config.json + adapter_model.safetensors, and the merged folder's, equal ours${
      'skip' in torch ? ` (skipped: ${torch.skip})` : ''
    }`,
    () => {
      const dir = mkdtempSync(join(tmpdir(), 'peft-export-'));
      try {
        const base = randomWeights(qwen);
        const lora = randomLora(qwen, {
          ...LORA,
          useRslora: true,
          targetModules: ['k_proj', 'o_proj', 'gate_proj', 'down_proj'],
        });
        // One flat folder, each file named <what>-<its name> (what peft_check.py reads).
        const write = (what: string, files: Map<string, Uint8Array>) => {
          for (const [name, bytes] of files) writeFileSync(join(dir, `${what}-${name}`), bytes);
        };
        write('base', exportHfFolder({ config: qwen, tensors: base }));
        write('merged', exportHfFolder({ config: qwen, tensors: base, lora }));
        write('adapter', exportPeftAdapter({ config: qwen, lora }));
        const run = spawnSync(
          (torch as { python: string }).python,
          ['tests/support/peft_check.py', dir, JSON.stringify({ tokens: [...tokens], N, T })],
          { encoding: 'utf8', maxBuffer: 1 << 26 },
        );
        expect(run.stderr).toBe('');
        expect(run.status).toBe(0);
        const out = JSON.parse(run.stdout) as { peft: number[]; merged: number[] };
        const ours = new RefLlama(qwen, base, lora).forward(tokens, N, T, keyStart).logits;
        expectClose(out.peft, ours, TORCH_TOLERANCE);
        expectClose(out.merged, ours, MERGED_TOLERANCE);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );
});
