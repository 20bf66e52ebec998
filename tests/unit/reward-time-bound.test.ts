// Issue 33, item 4: what a hostile custom reward costs a step. A source whose top level runs for
// a long time and whose `reward` never returns used to cost, per call, the time limit plus a full
// reload of the source (rewardTimeoutMs 1000 and a 4.7 s top level: 5.0–6.5 s per call). Now only
// the source's first load has its own limit; every later load comes out of the limit of the call
// that needs it, so a step with C calls costs about C × limit plus a constant. The bound below is
// a correctness bound with room for a loaded 2-core machine, not a benchmark: before the change
// the second step took C × (limit + top level) ≈ 6.8 s here.
import { afterEach, describe, expect, it } from 'vitest';
import { createNodeSandbox } from '../../src/rewards/reward-sandbox-node';
import type { WorkerRewardSandbox } from '../../src/rewards/reward-sandbox';
import type { RewardInput } from '../../src/rewards/rewards';

const LIMIT_MS = 200;
const CALLS = 4;
/** The hostile top level's own running time (under the default 5 s load limit). */
const TOP_LEVEL_MS = 1500;
/** Messages, worker bookkeeping and a busy machine, per step (not per call). */
const SLACK_MS = 2000;

const input = (completion: string): RewardInput => ({
  completion,
  prompt: 'p',
  problem: { id: 'p', task: 'jsonl', question: 'q', reference: null, verifier: { kind: 'none' } },
});

let sandbox: WorkerRewardSandbox | null = null;
afterEach(() => sandbox?.dispose());

describe('a hostile reward costs a step at most about calls × limit', () => {
  it('a slow top level and a reward that never returns: reloads come out of the call limit', async () => {
    sandbox = createNodeSandbox(
      `const t0 = Date.now(); while (Date.now() - t0 < ${TOP_LEVEL_MS}) {}\n` +
        'function reward() { for (;;) {} }',
    );
    const inputs = Array.from({ length: CALLS }, (_, i) => input(`c${i}`));
    const steps: number[] = [];
    for (let step = 0; step < 3; step++) {
      const t0 = performance.now();
      const outs = await sandbox.score(inputs, LIMIT_MS);
      steps.push(performance.now() - t0);
      for (const o of outs) {
        expect(o).toMatchObject({ timedOut: true });
        expect(String((o as { error: unknown }).error)).toMatch(/exceeded the 200 ms time limit/);
      }
    }
    // The first step pays the first load once (bounded by loadTimeoutMs); later ones only calls.
    expect(steps[0]).toBeLessThan(TOP_LEVEL_MS + CALLS * LIMIT_MS + SLACK_MS);
    expect(steps[1]).toBeLessThan(CALLS * LIMIT_MS + SLACK_MS);
    expect(steps[2]).toBeLessThan(CALLS * LIMIT_MS + SLACK_MS);
  });

  it('an ordinary reward still scores after a timeout: the reload fits in the next call', async () => {
    sandbox = createNodeSandbox(
      "let calls = 0;\nfunction reward({ completion }) { calls++; if (completion === 'loop') for (;;) {} return calls; }",
    );
    const outs = await sandbox.score([input('a'), input('loop'), input('b'), input('c')], 1000);
    expect(outs[0]).toEqual({ value: 1 });
    expect(outs[1]).toMatchObject({ timedOut: true });
    // A fresh runtime: the count starts again, nothing of the stopped call remains.
    expect(outs.slice(2)).toEqual([{ value: 1 }, { value: 2 }]);
  });
});
