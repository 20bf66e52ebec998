// Property-based fuzzing (fast-check, fixed seed, bounded runs and time) of every parser that reads
// a file the user brings: the safetensors header, config.json (parseHfConfig), JSONL datasets and
// checkpoint import. Whatever the bytes, each must return or throw the project's own typed error
// (never a TypeError, RangeError from a typed array, hang or huge allocation), and a rejected
// checkpoint import must leave the database exactly as it was.
import 'fake-indexeddb/auto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CONFIG_LIMITS,
  ModelConfigError,
  llamaConfigProblem,
  parameterSpecs,
  parseHfConfig,
  type LlamaConfig,
} from '../../src/core/model-config';
import { ModelFileError } from '../../src/formats/errors';
import { parseSafetensors, writeSafetensors } from '../../src/formats/safetensors';
import { CheckpointImportError, GrpoStorage, type CheckpointTensor } from '../../src/storage';
import { decodeCheckpointFile, encodeCheckpointFile } from '../../src/storage/transfer';
import { createJsonlTask, parseJsonlDataset } from '../../src/tasks/jsonl';
import { TINY_CONFIG } from '../support/run-storage';

// Bounded: a fixed seed so a failure reproduces, and a time cap so a slow machine stays fast.
const RUNS = { seed: 42, numRuns: 300, interruptAfterTimeLimit: 20_000 } as const;

/** Runs `fn`; a thrown error must be an instance of `type` (returned), else the property fails. */
function typedOutcome<T>(fn: () => T, type: new (...args: never[]) => Error): T | Error {
  try {
    return fn();
  } catch (err) {
    if (!(err instanceof type)) {
      throw new Error(`expected ${type.name}, got ${String(err)}`, { cause: err });
    }
    return err;
  }
}

// ---- safetensors --------------------------------------------------------------------------

/** A safetensors file from a header value and a data length (the header need not be valid). */
function fileOf(header: unknown, dataBytes: number, lengthOverride?: bigint): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(header));
  const out = new Uint8Array(8 + json.length + dataBytes);
  new DataView(out.buffer).setBigUint64(0, lengthOverride ?? BigInt(json.length), true);
  out.set(json, 8);
  for (let i = 8 + json.length; i < out.length; i++) out[i] = (i * 37) & 0xff;
  return out;
}

const dim = fc.oneof(
  fc.integer({ min: 0, max: 6 }),
  fc.constantFrom(-1, 1.5, 2 ** 53, 1e300, Number.MAX_SAFE_INTEGER),
);
const offset = fc.oneof(
  fc.integer({ min: 0, max: 64 }),
  fc.constantFrom(-4, 0.5, 2 ** 53, 1e20, Number.MAX_SAFE_INTEGER),
);
const entry = fc.record(
  {
    dtype: fc.oneof(
      fc.constantFrom('F32', 'F16', 'BF16', 'I64', 'Q4', ''),
      fc.anything() as fc.Arbitrary<unknown>,
    ),
    shape: fc.oneof(fc.array(dim, { maxLength: 4 }), fc.anything() as fc.Arbitrary<unknown>),
    data_offsets: fc.oneof(
      fc.tuple(offset, offset),
      fc.array(offset, { maxLength: 3 }),
      fc.anything() as fc.Arbitrary<unknown>,
    ),
  },
  { requiredKeys: [] },
);
const header = fc.dictionary(
  fc.oneof(fc.constantFrom('a', 'b', 'c', '__metadata__', 'model.norm.weight'), fc.string()),
  fc.oneof(entry, fc.anything() as fc.Arbitrary<unknown>),
  { maxKeys: 5 },
);

describe('fuzz: safetensors parser', () => {
  it('random headers and data lengths: a result whose ranges tile the data, or a ModelFileError', () => {
    fc.assert(
      fc.property(
        header,
        fc.integer({ min: 0, max: 80 }),
        fc.option(fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }), { freq: 5 }),
        (h, dataBytes, lengthOverride) => {
          const bytes = fileOf(h, dataBytes, lengthOverride ?? undefined);
          const out = typedOutcome(
            () => parseSafetensors(bytes, 'fuzz.safetensors'),
            ModelFileError,
          );
          if (out instanceof Error) {
            expect(out.message.startsWith('fuzz.safetensors')).toBe(true);
            return;
          }
          // Accepted: every tensor's values are inside the file and the ranges cover the data.
          let covered = 0;
          for (const t of out.tensors.values()) {
            expect(t.data.length).toBe(t.shape.reduce((a, b) => a * b, 1));
            covered += t.data.length * (t.dtype === 'F32' ? 4 : 2);
          }
          const dataStart = bytes.length - dataBytes;
          expect(covered).toBe(bytes.length - dataStart);
        },
      ),
      RUNS,
    );
  });

  it('random bytes and truncations of a valid file: only ModelFileError', () => {
    const valid = writeSafetensors([
      { name: 'a', shape: [2, 3], data: Float32Array.from([1, 2, 3, 4, 5, 6]) },
      { name: 'b', shape: [4], data: Float32Array.from([7, 8, 9, 10]) },
    ]);
    fc.assert(
      fc.property(
        fc.oneof(
          fc.uint8Array({ maxLength: 200 }),
          fc.integer({ min: 0, max: valid.length }).map((n) => valid.slice(0, n)),
          fc
            .array(fc.tuple(fc.nat(valid.length - 1), fc.integer({ min: 0, max: 255 })), {
              minLength: 1,
              maxLength: 4,
            })
            .map((edits) => {
              const b = valid.slice();
              for (const [i, v] of edits) b[i] = v;
              return b;
            }),
        ),
        (bytes) => {
          typedOutcome(() => parseSafetensors(bytes, 'bytes.safetensors'), ModelFileError);
        },
      ),
      RUNS,
    );
  });
});

// ---- config.json ----------------------------------------------------------------------------

const BASE_CONFIG = {
  architectures: ['LlamaForCausalLM'],
  hidden_size: 8,
  intermediate_size: 12,
  num_hidden_layers: 2,
  num_attention_heads: 2,
  num_key_value_heads: 1,
  vocab_size: 64,
  max_position_embeddings: 32,
  rms_norm_eps: 1e-5,
  rope_theta: 10000,
  bos_token_id: 1,
  eos_token_id: 2,
};
const configValue = fc.oneof(
  fc.integer({ min: -2, max: 70 }),
  fc.constantFrom(0, 1e7, 1e12, 2 ** 31, 2 ** 53, -1, 0.5, 1e-300, 1e300, null, 'silu', 'gelu'),
  fc.constantFrom(true, false, [1, 2], [70], ['x'], {}),
  fc.jsonValue({ maxDepth: 2 }),
);
const CONFIG_KEYS = [
  ...Object.keys(BASE_CONFIG),
  'head_dim',
  'hidden_act',
  'mlp_bias',
  'tie_word_embeddings',
  'attention_bias',
  'rope_scaling',
  'model_type',
];

describe('fuzz: parseHfConfig', () => {
  it('edited configs: a config within every bound, or a ModelConfigError naming the file, fast', () => {
    fc.assert(
      fc.property(
        fc.dictionary(fc.constantFrom(...CONFIG_KEYS), configValue, { maxKeys: 6 }),
        fc.subarray(Object.keys(BASE_CONFIG), { maxLength: 2 }),
        (edits, removed) => {
          const json: Record<string, unknown> = { ...BASE_CONFIG, ...edits };
          for (const k of removed) delete json[k];
          const started = performance.now();
          const out = typedOutcome(() => parseHfConfig(json, 'fuzz/config.json'), ModelConfigError);
          if (out instanceof Error) {
            expect(out.message.startsWith('fuzz/config.json: ')).toBe(true);
          } else {
            expect(llamaConfigProblem(out)).toBeNull();
            expect(out.numLayers).toBeLessThanOrEqual(CONFIG_LIMITS.num_hidden_layers);
            // Sizing the parameter list from an accepted config is cheap.
            expect(parameterSpecs(out).length).toBeGreaterThan(0);
          }
          expect(performance.now() - started).toBeLessThan(200);
        },
      ),
      RUNS,
    );
  });

  it('any JSON value: only ModelConfigError', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (json) => {
        typedOutcome(() => parseHfConfig(json), ModelConfigError);
      }),
      RUNS,
    );
  });
});

// ---- JSONL ----------------------------------------------------------------------------------

const jsonlLine = fc.oneof(
  fc.constant('{"prompt": "What is 2 + 2?", "answer": "4"}'),
  fc.constant(
    '{"messages": [{"role": "user", "content": "Hi?"}, {"role": "assistant", "content": "Hi"}]}',
  ),
  fc.constant(''),
  fc.constant('   '),
  fc.string({ maxLength: 30 }),
  fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v)),
  fc
    .record(
      { prompt: fc.oneof(fc.string(), fc.anything()), answer: fc.anything() },
      { requiredKeys: [] },
    )
    .map((v) => JSON.stringify(v) ?? 'undefined'),
);

describe('fuzz: JSONL reader', () => {
  it('any lines, any line ends, with or without a BOM: every non-blank line is a problem or an issue', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(jsonlLine, fc.constantFrom('\n', '\r\n', '\r')), { maxLength: 12 }),
        fc.boolean(),
        fc.constantFrom('exact', 'numeric', 'choice'),
        (rows, bom, checker) => {
          const text = (bom ? '\uFEFF' : '') + rows.map(([l, eol]) => l + eol).join('');
          const { problems, issues } = parseJsonlDataset(text, {
            checker: checker as 'exact' | 'numeric' | 'choice',
          });
          const lines = text.replace(/^\uFEFF/, '').split(/\r\n|\r|\n/);
          const used = [
            ...problems.map((p) => Number(p.id.slice('jsonl-'.length))),
            ...issues.map((i) => i.line),
          ].sort((a, b) => a - b);
          const nonBlank = lines
            .map((l, i) => [l, i + 1] as const)
            .filter(([l]) => l.replace(/[ \t\n\v\f\r]/g, '') !== '')
            .map(([, n]) => n);
          expect(used).toEqual(nonBlank);
          for (const i of issues) expect(i.message.length).toBeGreaterThan(0);
          // The task either builds or says why no line is usable.
          const task = typedOutcome(() => createJsonlTask(text), RangeError);
          if (task instanceof Error) expect(task.message).toMatch(/^jsonl: no usable line/);
        },
      ),
      RUNS,
    );
  });
});

// ---- checkpoint import ----------------------------------------------------------------------

const MODEL: LlamaConfig = { ...TINY_CONFIG, maxPositions: 8 };

describe('fuzz: checkpoint import (fake-indexeddb)', () => {
  let storage: GrpoStorage;
  let exported: Uint8Array;
  beforeAll(async () => {
    storage = await GrpoStorage.open({
      indexedDB: new IDBFactory(),
      name: 'fuzz-import',
      chunkBytes: 256,
      storageManager: null,
    });
    const tensors: CheckpointTensor[] = parameterSpecs(MODEL).map((s, k) => ({
      name: s.name,
      shape: s.shape,
      data: Float32Array.from({ length: s.shape.reduce((a, b) => a * b, 1) }, (_, i) => k + i / 8),
    }));
    const record = await storage.saveCheckpoint({
      runId: 'fuzz-run',
      runName: 'fuzz',
      step: 1,
      optimizerStep: 1,
      tensors,
      rng: { sampler: [1, 2, 3, 4] },
      config: { task: 'countdown' },
      modelConfig: MODEL,
      modelIdentity: { name: 'm', sha256: '00'.repeat(32) },
      referenceIdentity: null,
      tokenizerIdentity: null,
      metricsSoFar: null,
      metrics: null,
    });
    exported = await storage.exportCheckpoint(record.id);
  });
  afterAll(() => storage.close());

  const stores = ['runs', 'metrics', 'checkpoints', 'checkpointDetails', 'chunks'] as const;
  const snapshot = async () =>
    Object.fromEntries(
      await Promise.all(stores.map(async (s) => [s, await storage.db.getAllKeys(s)] as const)),
    );

  /** Edits of the manifest: a key path and a value (often out of range) put there. */
  const MANIFEST_PATHS = [
    ['step'],
    ['schemaVersion'],
    ['safetensorsBytes'],
    ['run'],
    ['metricsSoFar'],
    ['tensors'],
    ['tensors', 0, 'shape'],
    ['tensors', 0, 'dataOffsets'],
    ['tensors', 1, 'name'],
    ...[
      'numLayers',
      'hiddenSize',
      'vocabSize',
      'numHeads',
      'numKvHeads',
      'headDim',
      'intermediateSize',
      'maxPositions',
      'ropeTheta',
      'eosTokenIds',
      'architecture',
    ].map((k) => ['modelConfig', k]),
  ] as const;
  const DIMENSIONS = [
    'numLayers',
    'hiddenSize',
    'vocabSize',
    'numHeads',
    'numKvHeads',
    'headDim',
    'intermediateSize',
    'maxPositions',
  ] as const;
  /** A file whose only flaw is a huge (or odd) dimension: the case that used to take minutes. */
  const hugeDimension = fc
    .tuple(fc.constantFrom(...DIMENSIONS), fc.constantFrom(1e5, 1e6, 1e7, 2 ** 31, 3, 1025))
    .map(([key, value]) => {
      const { manifest, safetensors } = decodeCheckpointFile(exported, 'x');
      const m = structuredClone(manifest) as { modelConfig: Record<string, unknown> };
      m.modelConfig[key] = value;
      return encodeCheckpointFile(m, safetensors);
    });
  const manifestEdit = fc.tuple(
    fc.constantFrom(...MANIFEST_PATHS),
    fc.oneof(
      fc.constantFrom(1e6, 1e7, 1e9, 2 ** 53, -1, 0, 1024, 65536, null, [], {}, 'x'),
      fc.jsonValue({ maxDepth: 2 }),
    ),
  );

  it('mutated files are imported or rejected with a CheckpointImportError; rejection writes nothing', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          hugeDimension,
          fc
            .array(fc.tuple(fc.nat(exported.length - 1), fc.integer({ min: 0, max: 255 })), {
              minLength: 1,
              maxLength: 3,
            })
            .map((edits) => {
              const b = exported.slice();
              for (const [i, v] of edits) b[i] = v;
              return b;
            }),
          fc.nat(exported.length).map((n) => exported.slice(0, n)),
          fc.array(manifestEdit, { minLength: 1, maxLength: 3 }).map((edits) => {
            const { manifest, safetensors } = decodeCheckpointFile(exported, 'x');
            const m = structuredClone(manifest) as Record<string, unknown>;
            for (const [path, value] of edits) {
              let obj = m as Record<string | number, unknown>;
              for (const key of path.slice(0, -1)) {
                const next = obj[key];
                if (typeof next !== 'object' || next === null) break;
                obj = next as Record<string | number, unknown>;
              }
              obj[path[path.length - 1]] = value;
            }
            return encodeCheckpointFile(m, safetensors);
          }),
        ),
        async (bytes) => {
          const before = await snapshot();
          const started = performance.now();
          const out = await storage
            .importCheckpoint(bytes, { fileName: 'fuzz.grpockpt' })
            .catch((e: unknown) => e);
          expect(performance.now() - started).toBeLessThan(3000);
          if (out instanceof Error) {
            expect(out).toBeInstanceOf(CheckpointImportError);
            expect(out.message.startsWith('fuzz.grpockpt: ')).toBe(true);
            expect(await snapshot()).toEqual(before);
          } else {
            expect((await snapshot()).runs.length).toBe(before.runs.length + 1);
          }
        },
      ),
      { ...RUNS, numRuns: 150 },
    );
  }, 120_000);
});
