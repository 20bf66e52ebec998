// A run file that carries a checkpoint with custom reward code asks before that code can run, as a
// checkpoint import does (src/app/stores/runs.svelte.ts importWithConsent, on fake-indexeddb): the
// question shows the checkpoint's code (what its restore would run) before anything is stored;
// declining still imports the data; a checkpoint with an invalid reward id is refused unasked with
// nothing stored; a run file without a checkpoint has nothing that runs and asks nothing.
import 'fake-indexeddb/auto';
import { describe, expect, it, vi } from 'vitest';
import { Runs } from '../../src/app/stores/runs.svelte';
import { storageOpener, tinyCheckpoint } from '../support/run-storage';

const open = storageOpener('consent');

const CODE = { len: 'return completion.length < 50 ? 1 : 0;' };

/** A run file exported from its own database, with a checkpoint of `config` when asked. */
async function runFile(config: Record<string, unknown>, withCheckpoint: boolean) {
  const s = await open();
  const meta = { id: 'r1', name: 'custom reward run', config };
  await s.recordRunMetrics(meta, [{ step: 1, reward: 1 }]);
  const payload = tinyCheckpoint(1, config, () => 0.5, {
    metricsSoFar: [{ step: 1, reward: 1 }],
    metrics: { step: 1, reward: 1 },
  });
  if (withCheckpoint) await s.saveCheckpoint(payload);
  const file = await s.exportRunFile('r1', withCheckpoint);
  return Object.assign(new Blob([file.bytes as Uint8Array<ArrayBuffer>]), { name: file.fileName });
}

async function target() {
  const s = await open();
  return { s, runs: new Runs(async () => s) };
}

describe('importing a run file with custom reward code', () => {
  const custom = { rewards: ['format', 'custom:len'], customRewards: CODE };

  it("asks with the checkpoint's code before storing; declining still imports the data", async () => {
    const file = await runFile(custom, true);
    const { s, runs } = await target();
    let storedWhenAsked = -1;
    const ask = vi.fn(async () => {
      storedWhenAsked = (await s.listRunHistories()).length;
      return false;
    });
    const { result, allowed } = await runs.importWithConsent(file, ask);
    expect(ask).toHaveBeenCalledExactlyOnceWith(
      'import',
      "The run file 'custom_reward_run.grporun'",
      CODE,
    );
    expect(storedWhenAsked).toBe(0);
    expect(allowed).toBe(false);
    expect(result.checkpointStep).toBe(1);
    expect((await s.listCheckpoints(result.run.id)).map((c) => c.step)).toEqual([1]);
  });

  it('refuses a checkpoint with an invalid reward id unasked, storing nothing', async () => {
    const file = await runFile({ rewards: ['custom:Bad Id'], customRewards: {} }, true);
    const { s, runs } = await target();
    const ask = vi.fn(async () => true);
    await expect(runs.importWithConsent(file, ask)).rejects.toThrow(
      "custom_reward_run.grporun: config 'rewards'",
    );
    expect(ask).not.toHaveBeenCalled();
    expect(await s.listRunHistories()).toEqual([]);
  });

  it('asks nothing for a run file without a checkpoint (no code of it can run)', async () => {
    const file = await runFile(custom, false);
    const { runs } = await target();
    const ask = vi.fn(async () => false);
    const { result, allowed } = await runs.importWithConsent(file, ask);
    expect(ask).not.toHaveBeenCalled();
    expect([allowed, result.rows, result.checkpointStep]).toEqual([true, 1, null]);
    expect(runs.list.map((r) => r.config)).toEqual([custom]);
  });
});
