// The run's CSV and TRL-style JSONL, asserted as exact text: the union of metric keys in a stable
// order, empty CSV fields for missing values, NaN / inf spelled as pandas reads them, RFC 4180
// quoting, TRL's key order (loss, grad_norm, learning_rate, …, epoch, step), the global step under
// μ > 1 and null for a non-finite value.
import { describe, expect, it } from 'vitest';
import {
  metricColumns,
  runCsv,
  runFileName,
  runJsonl,
  type LogRow,
} from '../../src/export/run-log';

// Out of step order on purpose; step 2 has no kl, step 3 adds a reward function's mean.
const ROWS: LogRow[] = [
  { step: 2, reward: 0.75, loss: -0.01, learning_rate: 0.0002, grad_norm: 1.5 },
  { step: 1, reward: 0.5, kl: 0.125, loss: 0.03, learning_rate: 0.0002, grad_norm: 2 },
  {
    step: 3,
    reward: 1,
    kl: NaN,
    loss: 0,
    learning_rate: 0.0002,
    grad_norm: Infinity,
    'rewards/format/mean': 1,
  },
];

describe('CSV', () => {
  it('has step and the union of metric keys in first-appearance order, one line per step', () => {
    expect(metricColumns(ROWS)).toEqual([
      'reward',
      'kl',
      'loss',
      'learning_rate',
      'grad_norm',
      'rewards/format/mean',
    ]);
    expect(runCsv(ROWS)).toBe(
      'step,reward,kl,loss,learning_rate,grad_norm,rewards/format/mean\n' +
        '1,0.5,0.125,0.03,0.0002,2,\n' +
        '2,0.75,,-0.01,0.0002,1.5,\n' +
        '3,1,NaN,0,0.0002,inf,1\n',
    );
  });

  it('quotes a key with a comma or quote, and writes only the header with no rows', () => {
    expect(runCsv([{ step: 1, 'rewards/a,"b"/mean': -Infinity, x: 1e-7 }])).toBe(
      'step,"rewards/a,""b""/mean",x\n1,-inf,1e-7\n',
    );
    expect(runCsv([])).toBe('step\n');
  });
});

describe('TRL-style JSONL', () => {
  it('writes loss, grad_norm, learning_rate first, the rest in order, then step; null for NaN', () => {
    expect(runJsonl(ROWS)).toBe(
      '{"loss":0.03,"grad_norm":2,"learning_rate":0.0002,"reward":0.5,"kl":0.125,"step":1}\n' +
        '{"loss":-0.01,"grad_norm":1.5,"learning_rate":0.0002,"reward":0.75,"step":2}\n' +
        '{"loss":0,"grad_norm":null,"learning_rate":0.0002,"reward":1,"kl":null,"rewards/format/mean":1,"step":3}\n',
    );
  });

  it('counts optimizer steps under μ > 1 and adds the epoch when the run has one', () => {
    const rows = [
      { step: 1, reward: 0.5 },
      { step: 2, reward: 0.25 },
    ];
    expect(runJsonl(rows, { numIterations: 2, epochOf: (s) => s / 8 })).toBe(
      '{"reward":0.5,"epoch":0.125,"step":2}\n{"reward":0.25,"epoch":0.25,"step":4}\n',
    );
    expect(runJsonl([])).toBe('');
    expect(() => runJsonl(rows, { numIterations: 0 })).toThrow('numIterations must be ≥ 1, got 0');
  });
});

describe('file names', () => {
  it('keeps safe characters of the run name', () => {
    expect(runFileName('Countdown: lr 2e-4 / β 0', '.metrics.csv')).toBe(
      'Countdown_lr_2e-4_0.metrics.csv',
    );
    expect(runFileName('***', '.jsonl')).toBe('run.jsonl');
  });
});
