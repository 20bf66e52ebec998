// Fixtures of the run-file tests (run-file, run-import-consent): a tiny Llama config, GrpoStorage
// databases each on a fresh fake-indexeddb factory (two of them stand for two browser profiles),
// closed after each test, and a checkpoint of that model (every parameter and both AdamW moments)
// with the tensor values a test picks, so a bit-for-bit round trip can be checked.
import 'fake-indexeddb/auto';
import { afterEach } from 'vitest';
import { parameterSpecs, type LlamaConfig } from '../../src/core/model-config';
import {
  GrpoStorage,
  OPTIMIZER_EXP_AVG,
  OPTIMIZER_EXP_AVG_SQ,
  type CheckpointPayload,
} from '../../src/storage';

export const TINY_CONFIG: LlamaConfig = {
  architecture: 'LlamaForCausalLM',
  hiddenSize: 4,
  intermediateSize: 6,
  numLayers: 1,
  numHeads: 2,
  numKvHeads: 1,
  headDim: 2,
  vocabSize: 5,
  maxPositions: 16,
  ropeTheta: 10_000,
  rmsNormEps: 1e-6,
  tieWordEmbeddings: true,
  attentionBias: false,
  bosTokenId: null,
  eosTokenIds: [1],
};

export const TINY_IDENTITY = { name: 'tiny', sha256: 'ab'.repeat(32) };

/**
 * Registers an afterEach that closes what it opened, and returns an opener of databases named
 * `<prefix>-1`, `<prefix>-2`, …, each on its own IndexedDB (`now`: the storage's clock). Call it
 * at a test file's top level.
 */
export function storageOpener(prefix: string): (now?: () => number) => Promise<GrpoStorage> {
  let n = 0;
  const opened: GrpoStorage[] = [];
  afterEach(() => {
    for (const s of opened.splice(0)) s.close();
  });
  return async (now) => {
    const s = await GrpoStorage.open({
      indexedDB: new IDBFactory(),
      name: `${prefix}-${++n}`,
      storageManager: null,
      ...(now ? { now } : {}),
    });
    opened.push(s);
    return s;
  };
}

/**
 * A checkpoint of run 'r1' of TINY_CONFIG at `step` (AdamW at the same step), its tensors every
 * parameter and both moments with element i of tensor k set to value(k, i); `rest` adds or
 * overrides fields (runName, rng, metrics).
 */
export function tinyCheckpoint(
  step: number,
  config: Record<string, unknown>,
  value: (k: number, i: number) => number,
  rest: Partial<CheckpointPayload> = {},
): CheckpointPayload {
  const specs = parameterSpecs(TINY_CONFIG);
  const all = [
    ...specs,
    ...specs.map((x) => ({ ...x, name: OPTIMIZER_EXP_AVG + x.name })),
    ...specs.map((x) => ({ ...x, name: OPTIMIZER_EXP_AVG_SQ + x.name })),
  ];
  return {
    runId: 'r1',
    step,
    optimizerStep: step,
    tensors: all.map(({ name, shape }, k) => ({
      name,
      shape: shape.slice(),
      data: Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, (_, i) => value(k, i)),
    })),
    rng: {},
    config,
    modelConfig: TINY_CONFIG,
    modelIdentity: TINY_IDENTITY,
    referenceIdentity: null,
    tokenizerIdentity: null,
    ...rest,
  };
}
