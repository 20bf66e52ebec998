// Checkpoint export / import (one .grpockpt file: manifest JSON + safetensors body) on
// fake-indexeddb: a bit-exact round trip into another database, and every kind of bad file
// rejected with its own message while the database stays exactly as it was.
import 'fake-indexeddb/auto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseSafetensors, writeSafetensors } from '../../src/formats/safetensors';
import type { LlamaConfig } from '../../src/core/model-config';
import { parameterSpecs } from '../../src/core/model-config';
import {
  CheckpointImportError,
  GrpoStorage,
  OPTIMIZER_EXP_AVG,
  OPTIMIZER_EXP_AVG_SQ,
  type CheckpointPayload,
  type CheckpointTensor,
  type ExportManifest,
} from '../../src/storage';
import { decodeCheckpointFile, encodeCheckpointFile } from '../../src/storage/transfer';

// Qwen2-style tiny model (q/k/v biases, tied embeddings) so import validation covers both layouts.
const CONFIG: LlamaConfig = {
  architecture: 'Qwen2ForCausalLM',
  hiddenSize: 8,
  intermediateSize: 12,
  numLayers: 2,
  numHeads: 2,
  numKvHeads: 1,
  headDim: 4,
  vocabSize: 13,
  maxPositions: 32,
  ropeTheta: 1_000_000,
  rmsNormEps: 1e-6,
  tieWordEmbeddings: true,
  attentionBias: true,
  bosTokenId: null,
  eosTokenIds: [1, 2],
};

function tensors(seed: number): CheckpointTensor[] {
  let state = seed >>> 0 || 1;
  const specs = parameterSpecs(CONFIG);
  const all = [
    ...specs,
    ...specs.map((s) => ({ ...s, name: OPTIMIZER_EXP_AVG + s.name })),
    ...specs.map((s) => ({ ...s, name: OPTIMIZER_EXP_AVG_SQ + s.name })),
  ];
  return all.map(({ name, shape }) => {
    const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
    const bits = new Uint32Array(data.buffer);
    for (let i = 0; i < bits.length; i++) {
      state ^= state << 13;
      state ^= state >>> 17;
      state ^= state << 5;
      bits[i] = state >>> 0;
    }
    bits[0] = 0xffc00001; // negative NaN with a payload survives export bit for bit
    return { name, shape: shape.slice(), data };
  });
}

function payload(runId: string, step: number): CheckpointPayload {
  return {
    runId,
    runName: 'Countdown / Qwen tiny',
    step,
    optimizerStep: step + 3,
    tensors: tensors(step),
    rng: { sampler: [0x12345678, 0x9abcdef0, 7, step], shuffle: 'pcg:99' },
    config: { task: 'countdown', groupSize: 4, learningRate: 1e-5, lossType: 'dapo' },
    modelConfig: CONFIG,
    modelIdentity: { name: 'qwen-tiny', sha256: '01'.repeat(32) },
    referenceIdentity: null,
    tokenizerIdentity: { name: 'qwen-tiny tokenizer', sha256: '02'.repeat(32) },
    metricsSoFar: [
      { step: 1, reward: 0.25, loss: 0.01, kl: NaN },
      { step: 2, reward: 0.5, loss: -0.02, 'rewards/format/mean': 0.75 },
    ],
    metrics: { step: 2, reward: 0.5, loss: -0.02, 'rewards/format/mean': 0.75 },
  };
}

const sameBits = (a: Float32Array, b: Float32Array) =>
  a.length === b.length &&
  new Uint32Array(a.buffer, a.byteOffset, a.length).every(
    (v, i) => v === new Uint32Array(b.buffer, b.byteOffset, b.length)[i],
  );

let counter = 0;
let source: GrpoStorage;
let target: GrpoStorage;
let saved: CheckpointPayload;
let exported: Uint8Array;

async function open(): Promise<GrpoStorage> {
  counter++;
  return GrpoStorage.open({
    indexedDB: new IDBFactory(),
    name: `transfer-${counter}`,
    chunkBytes: 512,
    storageManager: null,
  });
}

/** Everything in the database, to show that a rejected import changed nothing. */
async function snapshot(storage: GrpoStorage) {
  const stores = [
    'runs',
    'metrics',
    'samples',
    'checkpoints',
    'checkpointDetails',
    'chunks',
    'pendingSaves',
  ] as const;
  const out: Record<string, unknown[]> = {};
  for (const s of stores) out[s] = await storage.db.getAllKeys(s);
  return out;
}

beforeEach(async () => {
  source = await open();
  target = await open();
  saved = payload('src-run', 2);
  const record = await source.saveCheckpoint(saved);
  exported = await source.exportCheckpoint(record.id);
  // The target already holds a run of its own, which no import may disturb.
  await target.saveCheckpoint({ ...payload('local-run', 5), runName: 'local' });
});

afterEach(() => {
  source.close();
  target.close();
});

describe('export → import', () => {
  it('round-trips into another database bit for bit, as a new run with its metrics', async () => {
    const { run, checkpoint } = await target.importCheckpoint(exported, {
      fileName: 'run.grpockpt',
    });
    expect(run.id).not.toBe('src-run');
    expect(run.name).toBe('Countdown / Qwen tiny');
    expect(run.modelConfig).toEqual(CONFIG);
    expect(checkpoint.step).toBe(2);
    expect((await target.listRuns()).map((r) => r.id).sort()).toEqual(['local-run', run.id].sort());

    const loaded = await target.loadCheckpoint(checkpoint.id);
    expect(loaded.tensors.map((t) => t.name)).toEqual(saved.tensors.map((t) => t.name));
    for (let i = 0; i < saved.tensors.length; i++) {
      expect(loaded.tensors[i].shape).toEqual(saved.tensors[i].shape);
      expect(sameBits(loaded.tensors[i].data, saved.tensors[i].data), saved.tensors[i].name).toBe(
        true,
      );
    }
    expect(loaded.optimizerStep).toBe(5);
    expect(loaded.rng).toEqual(saved.rng);
    expect(loaded.config).toEqual(saved.config);
    expect(loaded.modelIdentity).toEqual(saved.modelIdentity);
    expect(loaded.referenceIdentity).toBeNull();
    expect(loaded.tokenizerIdentity).toEqual(saved.tokenizerIdentity);
    expect(loaded.metrics).toEqual(saved.metrics);
    // JSON has no NaN: the value comes back as NaN from null, still present.
    expect(await target.getMetrics(run.id)).toEqual(saved.metricsSoFar);
  });

  it('writes a manifest with offsets and checksums and a standard safetensors body', async () => {
    const { manifest, safetensors } = decodeCheckpointFile(exported, 'x');
    const m = manifest as ExportManifest;
    expect(m.schemaVersion).toBe(1);
    expect(m.run).toEqual({ id: 'src-run', name: 'Countdown / Qwen tiny' });
    expect(m.safetensorsBytes).toBe(safetensors.byteLength);
    const body = parseSafetensors(safetensors, 'body.safetensors');
    expect(body.metadata.format).toBe('pt');
    expect([...body.tensors.keys()]).toEqual(m.tensors.map((t) => t.name));
    let offset = 0;
    for (const [i, e] of m.tensors.entries()) {
      expect(e.dataOffsets).toEqual([offset, offset + saved.tensors[i].data.byteLength]);
      offset = e.dataOffsets[1];
      expect(e.sha256).toMatch(/^[0-9a-f]{64}$/);
      expect(sameBits(body.tensors.get(e.name)!.data, saved.tensors[i].data)).toBe(true);
    }
  });

  it('exports a Blob with a safe file name, which imports too', async () => {
    const [record] = await source.listCheckpoints('src-run');
    const { blob, fileName } = await source.exportCheckpointBlob(record.id);
    expect(fileName).toBe('Countdown_Qwen_tiny-step2.grpockpt');
    // Same file but for the export time in the manifest.
    const again = decodeCheckpointFile(new Uint8Array(await blob.arrayBuffer()), 'blob');
    const first = decodeCheckpointFile(exported, 'bytes');
    expect({ ...(again.manifest as object), exportedAt: 0 }).toEqual({
      ...(first.manifest as object),
      exportedAt: 0,
    });
    expect(again.safetensors).toEqual(first.safetensors);
    const { checkpoint } = await target.importCheckpoint(blob);
    expect((await target.loadCheckpoint(checkpoint.id)).tensors.length).toBe(saved.tensors.length);
    // A second import of the same file gets a distinguishable name.
    const second = await target.importCheckpoint(exported);
    expect(second.run.name).toBe('Countdown / Qwen tiny (imported)');
  });
});

/** Rebuilds a consistent file (manifest offsets, sizes, body) from edited tensors. */
function rebuild(
  edit: (tensors: CheckpointTensor[], manifest: ExportManifest) => CheckpointTensor[],
): Uint8Array {
  const { manifest, safetensors } = decodeCheckpointFile(exported, 'x');
  const m = structuredClone(manifest) as ExportManifest;
  const body = parseSafetensors(safetensors, 'x');
  const sha = new Map(m.tensors.map((e) => [e.name, e.sha256]));
  const list = edit(
    [...body.tensors].map(([name, t]) => ({ name, shape: t.shape, data: t.data })),
    m,
  );
  let offset = 0;
  m.tensors = list.map((t) => {
    const entry = {
      name: t.name,
      shape: t.shape,
      dtype: 'F32' as const,
      dataOffsets: [offset, offset + t.data.byteLength] as [number, number],
      sha256: sha.get(t.name) ?? '00'.repeat(32),
    };
    offset += t.data.byteLength;
    return entry;
  });
  const newBody = writeSafetensors(list, { format: 'pt' });
  m.safetensorsBytes = newBody.byteLength;
  return encodeCheckpointFile(m, newBody);
}

describe('import rejects bad files and changes nothing', () => {
  const cases: Array<[string, () => Uint8Array, RegExp]> = [
    [
      'wrong magic',
      () => {
        const b = exported.slice();
        b[0] = 'X'.charCodeAt(0);
        return b;
      },
      /not a GRPO Playground checkpoint: it does not start with 'GRPOCKPT'/,
    ],
    [
      'a plain safetensors file',
      () => decodeCheckpointFile(exported, 'x').safetensors.slice(),
      /does not start with 'GRPOCKPT' \(a plain \.safetensors file is loaded as a model/,
    ],
    ['truncated in the header', () => exported.slice(0, 12), /file is truncated: 12 bytes/],
    [
      'truncated in the manifest',
      () => exported.slice(0, 100),
      /file is truncated: the manifest needs \d+ bytes but only 84 follow/,
    ],
    [
      'truncated in the tensor data',
      () => exported.slice(0, exported.length - 100),
      /file is truncated: the tensor data should be \d+ bytes but only \d+ are present/,
    ],
    [
      'bad JSON',
      () => {
        const b = exported.slice();
        b[16] = '!'.charCodeAt(0); // the manifest's opening brace
        return b;
      },
      /the manifest is not valid JSON/,
    ],
    [
      'unknown schema version',
      () => {
        const { manifest, safetensors } = decodeCheckpointFile(exported, 'x');
        return encodeCheckpointFile({ ...(manifest as object), schemaVersion: 99 }, safetensors);
      },
      /schema version 99 is not supported: this app reads version 1 \(the file comes from a newer/,
    ],
    [
      'checksum mismatch',
      () => {
        const b = exported.slice();
        b[b.length - 3] ^= 0x10; // inside the last tensor's data
        return b;
      },
      /tensor 'optimizer\.exp_avg_sq\.model\.norm\.weight' does not match its SHA-256 checksum/,
    ],
    [
      'tensor missing',
      () => rebuild((ts) => ts.filter((t) => t.name !== 'model.layers.1.self_attn.k_proj.bias')),
      /tensor 'model\.layers\.1\.self_attn\.k_proj\.bias' is missing/,
    ],
    [
      'optimizer state partly missing',
      () => rebuild((ts) => ts.filter((t) => t.name !== OPTIMIZER_EXP_AVG + 'model.norm.weight')),
      /tensor 'optimizer\.exp_avg\.model\.norm\.weight' is missing \(the AdamW state is partial\)/,
    ],
    [
      'shape mismatch',
      () =>
        rebuild((ts) =>
          ts.map((t) => (t.name === 'model.norm.weight' ? { ...t, shape: [2, 4] } : t)),
        ),
      /tensor 'model\.norm\.weight' has shape \[2, 4\] but the model config expects \[8\]/,
    ],
    [
      'unexpected tensor (lm_head with tied embeddings)',
      () =>
        rebuild((ts) => [
          ...ts,
          { name: 'lm_head.weight', shape: [13, 8], data: new Float32Array(104) },
        ]),
      /unexpected tensor 'lm_head\.weight'/,
    ],
    [
      'manifest and safetensors header disagree',
      () => {
        const { manifest, safetensors } = decodeCheckpointFile(exported, 'x');
        const m = structuredClone(manifest) as ExportManifest;
        [m.tensors[0], m.tensors[1]] = [m.tensors[1], m.tensors[0]];
        return encodeCheckpointFile(m, safetensors);
      },
      /the manifest and the safetensors header disagree about tensor/,
    ],
    [
      'model config that is not a supported model',
      () =>
        rebuild((ts, m) => {
          (m.modelConfig as unknown as Record<string, unknown>).hiddenSize = -8;
          return ts;
        }),
      /modelConfig\.hiddenSize must be a positive integer/,
    ],
  ];

  for (const [label, make, message] of cases) {
    it(label, async () => {
      const before = await snapshot(target);
      const err = await target
        .importCheckpoint(make(), { fileName: 'bad.grpockpt' })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(CheckpointImportError);
      expect((err as Error).message).toMatch(/^bad\.grpockpt: /);
      expect((err as Error).message).toMatch(message);
      expect(await snapshot(target)).toEqual(before);
    });
  }

  it('the rebuild helper itself produces importable files', async () => {
    const { checkpoint } = await target.importCheckpoint(rebuild((ts) => ts));
    expect(checkpoint.tensorCount).toBe(saved.tensors.length);
  });
});

describe('import bounds the model config before sizing anything from it', () => {
  const withConfig = (edit: Partial<LlamaConfig>) => {
    const { manifest, safetensors } = decodeCheckpointFile(exported, 'x');
    const m = structuredClone(manifest) as ExportManifest;
    Object.assign(m.modelConfig, edit);
    return encodeCheckpointFile(m, safetensors);
  };
  const cases: Array<[string, Partial<LlamaConfig>, string]> = [
    [
      '10^6 layers in a small file',
      { numLayers: 1_000_000 },
      'modelConfig.numLayers (num_hidden_layers) is 1000000, more than the 1024 this app supports',
    ],
    [
      'a vocabulary of 10^9',
      { vocabSize: 1e9 },
      'modelConfig.vocabSize (vocab_size) is 1000000000, more than the 4194304 this app supports',
    ],
    [
      'heads not a multiple of kv-heads',
      { numHeads: 3, numKvHeads: 2 },
      'modelConfig.numHeads (3) must be a multiple of numKvHeads (2)',
    ],
    ['rmsNormEps 0', { rmsNormEps: 0 }, 'modelConfig.rmsNormEps must be > 0, got 0'],
    [
      'an EOS id outside the vocabulary',
      { eosTokenIds: [13] },
      'modelConfig.eosTokenIds has id 13, outside vocabSize 13',
    ],
  ];
  for (const [label, edit, message] of cases) {
    it(
      label,
      async () => {
        const bytes = withConfig(edit);
        const before = await snapshot(target);
        const started = performance.now();
        const err = await target
          .importCheckpoint(bytes, { fileName: 'big.grpockpt' })
          .catch((e: unknown) => e);
        expect(performance.now() - started).toBeLessThan(2000);
        expect(err).toBeInstanceOf(CheckpointImportError);
        expect((err as Error).message).toBe(`big.grpockpt: ${message}`);
        expect(await snapshot(target)).toEqual(before);
      },
      10_000,
    );
  }
});
