// The playground's live controls: the keyboard shortcuts (src/app/lib/shortcuts.ts), the options
// whose change waits for a Reset (lib/pending.ts), the step's progress line (grpo/step-progress.ts:
// the Run's StepProgress and its words), and the session's answers to Pause and to actions that would discard
// unsaved steps (session.svelte.ts), driven through a fake trainer API.
import { describe, expect, it, vi } from 'vitest';
import type * as Comlink from 'comlink';
import { Session } from '../../src/app/session.svelte';
import { PLAYGROUND_DEFAULTS } from '../../src/app/stores/shell';
import { changedOptions, listOptions } from '../../src/app/lib/pending';
import { phaseFraction, phaseText } from '../../src/grpo/step-progress';
import { shortcutFor, type KeyLike } from '../../src/app/lib/shortcuts';
import { resolveConfig } from '../../src/grpo/config';
import { StepProgress } from '../../src/grpo/step-progress';
import type {
  CheckpointInfo,
  PhaseProgress,
  RunState,
  TrainerEvent,
} from '../../src/worker/protocol';
import type { TrainerApi } from '../../src/worker/trainer-api';

/** A stand-in for a DOM element: what shortcutFor reads of a focused target. */
function el(tagName: string, attrs: Record<string, string> = {}, editable = false) {
  return {
    tagName,
    isContentEditable: editable,
    getAttribute: (name: string) => attrs[name] ?? null,
  } as unknown as EventTarget;
}
const key = (k: string, target: EventTarget | null = el('BODY'), more: Partial<KeyLike> = {}) =>
  shortcutFor({ key: k, target, ...more });

describe('keyboard shortcuts', () => {
  it('S steps and P or Space runs / pauses when focus is on the page', () => {
    expect(key('s')).toBe('step');
    expect(key('S')).toBe('step');
    expect(key('p')).toBe('toggle-run');
    expect(key(' ')).toBe('toggle-run');
    expect(key('x')).toBeNull();
    expect(key('Enter')).toBeNull();
    expect(key('s', null)).toBe('step');
  });

  it('leaves text fields, modifiers, auto-repeat and handled keys alone', () => {
    for (const field of [
      el('INPUT'),
      el('INPUT', { type: 'number' }),
      el('INPUT', { type: 'search' }),
      el('TEXTAREA'),
      el('SELECT'),
      el('DIV', {}, true),
    ]) {
      expect(key('s', field)).toBeNull();
      expect(key(' ', field)).toBeNull();
    }
    expect(key('s', el('BODY'), { ctrlKey: true })).toBeNull();
    expect(key('s', el('BODY'), { metaKey: true })).toBeNull();
    expect(key('p', el('BODY'), { altKey: true })).toBeNull();
    expect(key('s', el('BODY'), { repeat: true })).toBeNull();
    expect(key('s', el('BODY'), { defaultPrevented: true })).toBeNull();
  });

  it('Space on a button, link or checkbox is that control’s own; letters still work there', () => {
    for (const control of [
      el('BUTTON'),
      el('A'),
      el('SUMMARY'),
      el('INPUT', { type: 'checkbox' }),
      el('DIV', { role: 'button' }),
    ]) {
      expect(key(' ', control)).toBeNull();
    }
    expect(key('s', el('BUTTON'))).toBe('step');
    expect(key('p', el('INPUT', { type: 'checkbox' }))).toBe('toggle-run');
  });
});

describe('options pending a Reset', () => {
  it('names exactly the options that differ, in schema order', () => {
    const a = resolveConfig(PLAYGROUND_DEFAULTS);
    expect(changedOptions(a, resolveConfig(PLAYGROUND_DEFAULTS))).toEqual([]);
    const b = resolveConfig({ ...PLAYGROUND_DEFAULTS, numGenerations: 8, learningRate: 1e-4 });
    const changed = changedOptions(a, b);
    expect(new Set(changed)).toEqual(new Set(['numGenerations', 'learningRate']));
    // Nested values (task options) compare by value.
    const c = resolveConfig({
      ...PLAYGROUND_DEFAULTS,
      taskOptions: { ...PLAYGROUND_DEFAULTS.taskOptions, maxTarget: 50 },
    });
    expect(changedOptions(a, c)).toEqual(['taskOptions']);
  });

  it('shortens long lists for the badge', () => {
    expect(listOptions(['a'])).toBe('a');
    expect(listOptions(['a', 'b', 'c', 'd'])).toBe('a, b, c, d');
    expect(listOptions(['a', 'b', 'c', 'd', 'e'])).toBe('a, b, c and 2 more');
  });
});

describe('step progress', () => {
  const limits = { maxCompletionLength: 4, numIterations: 2, beta: 0.04 };

  it('follows the trainer and the labelled GPU work of one step, then the checkpoint', () => {
    const seen: (PhaseProgress | null)[] = [];
    const p = new StepProgress((x) => seen.push(x));
    p.gpuWork('decode'); // nothing under way: chat or compare, not a step
    expect(seen).toEqual([]);
    p.trainer('sampling', 3, limits);
    for (const label of ['prefill', 'decode', 'decode', 'decode', 'decode']) p.gpuWork(label);
    p.trainer('rewards', 3, limits);
    p.trainer('update', 3, limits);
    for (const label of [
      'reference',
      'zero-grad',
      'policy',
      'optimizer',
      'zero-grad',
      'policy',
      'policy',
      'optimizer',
      'logp-after-update',
    ])
      p.gpuWork(label);
    p.after(3, 'checkpoint');
    p.gpuWork('decode'); // an evaluation's sampling is not the step's
    p.idle();
    p.idle();
    const text = seen.map((s) => (s ? `${s.step} ${phaseText(s)}` : 'idle'));
    expect(text).toEqual([
      '3 sampling 0/4 tokens',
      '3 sampling 1/4 tokens',
      '3 sampling 2/4 tokens',
      '3 sampling 3/4 tokens',
      '3 sampling 4/4 tokens', // capped: no token past maxCompletionLength
      '3 scoring rewards',
      '3 reference log-probs',
      '3 forward + backward, pass 1/2',
      '3 optimizer step 1/2',
      '3 forward + backward, pass 2/2',
      '3 optimizer step 2/2',
      '3 scoring the updated policy',
      '3 saving the checkpoint',
      'idle',
    ]);
    expect(p.current).toBeNull();
  });

  it('counts nothing for μ = 1 and gives a meter fraction only where it counts', () => {
    const seen: (PhaseProgress | null)[] = [];
    const p = new StepProgress((x) => seen.push(x));
    p.trainer('update', 1, { maxCompletionLength: 8, numIterations: 1, beta: 0 });
    p.gpuWork('zero-grad');
    p.gpuWork('optimizer');
    expect(seen.map((x) => x && phaseText(x))).toEqual(['forward + backward', 'optimizer step']);
    expect(phaseText({ phase: 'backward', done: 1, total: 1 })).toBe('forward + backward');
    expect(phaseText({ phase: 'optimizer', done: 1, total: 1 })).toBe('optimizer step');
    expect(phaseText({ phase: 'eval', done: null, total: null })).toBe('evaluating');
    expect(phaseFraction({ done: 20, total: 80 })).toBe(0.25);
    expect(phaseFraction({ done: null, total: null })).toBeNull();
    expect(phaseFraction({ done: 1, total: 1 })).toBeNull();
    expect(phaseFraction({ done: 1, total: 2 })).toBe(0.5);
  });
});

// ---- the session, on a fake worker --------------------------------------------------------

const CONFIG = resolveConfig(PLAYGROUND_DEFAULTS);
const runState = (runId: string, step = 0): RunState =>
  ({ runId, runName: runId, config: CONFIG, step, history: [], plan: null }) as unknown as RunState;
const checkpoint = (runId: string, step: number): CheckpointInfo => ({
  id: `${runId}-${step}`,
  runId,
  runName: runId,
  step,
  createdAt: 0,
  bytes: 1,
  reward: null,
});

/** A session on a fake worker: `emit` plays the worker's events, `calls` records the API calls. */
async function fakeSession() {
  let listener: ((e: TrainerEvent) => void) | null = null;
  const calls: string[] = [];
  let pauseDone: () => void = () => {};
  let current = runState('r1');
  const stored: CheckpointInfo[] = [];
  const api = {
    setListener: async (cb: (e: TrainerEvent) => void) => void (listener = cb),
    probeAdapter: async () => ({ ok: false, reason: 'test', remedy: 'none' }),
    listCheckpoints: async () => [...stored],
    deleteCheckpoint: async (id: string) => {
      stored.splice(
        stored.findIndex((c) => c.id === id),
        1,
      );
    },
    storageInfo: async () => ({ usage: null, quota: null, checkpointCount: 0, checkpointBytes: 0 }),
    loadModel: async () => {
      calls.push('loadModel');
      return { model: { label: 'm' }, run: current };
    },
    configure: async () => {
      calls.push('configure');
      current = runState('r2');
      return current;
    },
    saveCheckpoint: async () => {
      calls.push('save');
      stored.push(checkpoint(current.runId, session.training.step));
      return stored.at(-1)!;
    },
    restoreProblem: async (id: string) =>
      id === 'foreign'
        ? "This checkpoint was trained from 'model A', not from the loaded model ('m'): load that model, then restore."
        : null,
    restoreCheckpoint: async () => {
      calls.push('restore');
      return runState('r1', 1);
    },
    pause: () => {
      calls.push('pause');
      return new Promise<void>((resolve) => (pauseDone = resolve));
    },
  };
  const session = new Session(api as unknown as Comlink.Remote<TrainerApi>);
  await session.init();
  const emit = (e: TrainerEvent) => listener!(e);
  const trainSteps = (n: number) => {
    for (let i = 0; i < n; i++) {
      const step = session.training.step + 1;
      emit({
        type: 'step',
        report: { step, metrics: { reward: step }, groups: [], skipped: null, elapsedMs: 1 },
      } as TrainerEvent);
    }
  };
  return { session, emit, calls, trainSteps, resolvePause: () => pauseDone() };
}

/** Resolves once the session shows the discard dialog. */
async function discardDialog(session: Session) {
  for (let i = 0; i < 100 && !session.discard; i++) await new Promise((r) => setTimeout(r, 1));
  return session.discard;
}

describe('session: nothing is lost silently', () => {
  it('asks nothing when no step is unsaved', async () => {
    const { session, calls } = await fakeSession();
    await session.model.load();
    expect(session.checkpoints.unsavedSteps).toBe(0);
    await session.training.reset();
    expect(session.discard).toBeNull();
    expect(calls).toEqual(['loadModel', 'configure']);
  });

  it('Cancel keeps the run exactly as it was; Discard goes on', async () => {
    const { session, calls, trainSteps } = await fakeSession();
    await session.model.load();
    trainSteps(3);
    expect(session.checkpoints.unsavedSteps).toBe(3);
    const reset = session.training.reset();
    expect(await discardDialog(session)).toEqual({ action: 'reset', steps: 3, step: 3 });
    session.answerDiscard('cancel');
    await reset;
    expect(session.discard).toBeNull();
    expect(calls).toEqual(['loadModel']);
    expect([
      session.training.step,
      session.training.history.length,
      session.training.runId,
    ]).toEqual([3, 3, 'r1']);

    const again = session.training.reset();
    await discardDialog(session);
    session.answerDiscard('discard');
    await again;
    expect(calls).toEqual(['loadModel', 'configure']);
    expect([
      session.training.step,
      session.training.history.length,
      session.training.runId,
    ]).toEqual([0, 0, 'r2']);
  });

  it('"Save a checkpoint first" saves, then goes on; a later save counts only later steps', async () => {
    const { session, calls, trainSteps, emit } = await fakeSession();
    await session.model.load();
    trainSteps(2);
    const restore = session.checkpoints.restore('c');
    expect((await discardDialog(session))?.action).toBe('restore');
    session.answerDiscard('save');
    await restore;
    expect(calls).toEqual(['loadModel', 'save', 'restore']);

    // The restored run (r1 at step 1) holds its checkpoint once the list has it.
    expect(session.training.step).toBe(1);
    emit({ type: 'checkpoint-saved', checkpoint: checkpoint('r1', 1), automatic: true });
    trainSteps(2);
    expect(session.checkpoints.unsavedSteps).toBe(2);
    // Another run's checkpoint at a later step is not this run's.
    emit({ type: 'checkpoint-saved', checkpoint: checkpoint('other', 3), automatic: false });
    expect(session.checkpoints.unsavedSteps).toBe(2);
    emit({ type: 'checkpoint-saved', checkpoint: checkpoint('r1', 3), automatic: true });
    expect(session.checkpoints.unsavedSteps).toBe(0);
  });

  it('a checkpoint of another model is refused with both names before the discard question', async () => {
    const { session, calls, trainSteps } = await fakeSession();
    await session.model.load();
    trainSteps(2);
    await session.checkpoints.restore('foreign');
    expect(session.discard).toBeNull();
    expect(calls).toEqual(['loadModel']);
    expect(session.training.step).toBe(2);
    const banner = session.banners.at(-1)!;
    expect(banner.title).toBe('The checkpoint could not be restored');
    expect(banner.message).toContain("'model A'");
    expect(banner.message).toContain("('m')");
  });

  it('a failed automatic save stays until dismissed and names the unsaved steps', async () => {
    const { session, trainSteps, emit } = await fakeSession();
    await session.model.load();
    trainSteps(3);
    emit({
      type: 'checkpoint-failed',
      step: 3,
      message: 'QuotaExceededError',
      quota: false,
      candidates: [],
      automatic: true,
    } as TrainerEvent);
    const banner = session.banners.at(-1)!;
    expect(banner.title).toBe('The checkpoint at step 3 was not saved (training continues)');
    expect(banner.message).toBe(
      "QuotaExceededError Steps 1–3 are not in any checkpoint of run 'r1' yet.",
    );
    await new Promise((r) => setTimeout(r, 20));
    expect(session.banners.at(-1)).toBe(banner);
    session.dismiss(banner.id);
    expect(session.banners).not.toContain(banner);
  });

  it('stored rows the database left out are named in a banner until dismissed', async () => {
    const dismissed: (string[] | undefined)[] = [];
    const notices = [
      {
        key: 'a',
        during: 'upgrade to version 2',
        runId: 'r1',
        row: 'metrics row at step 3',
        problem: 'its step is NaN',
        at: 0,
      },
      {
        key: 'b',
        during: 'upgrade to version 2',
        runId: '(unknown)',
        row: "checkpoint 'c9'",
        problem: 'it has no run id',
        at: 0,
      },
    ];
    const api = {
      setListener: async () => {},
      probeAdapter: async () => ({ ok: false, reason: 'test', remedy: 'none' }),
      listCheckpoints: async () => [],
      storageInfo: async () => ({
        usage: null,
        quota: null,
        checkpointCount: 0,
        checkpointBytes: 0,
      }),
      storageNotices: async () => notices,
      dismissStorageNotices: async (keys?: string[]) => {
        dismissed.push(keys);
        return keys?.length ?? 0;
      },
    };
    const session = new Session(api as unknown as Comlink.Remote<TrainerApi>);
    await session.init();
    await vi.waitFor(() => expect(session.banners).toHaveLength(1));
    const banner = session.banners[0];
    expect(banner.title).toBe('2 stored rows could not be read and were left out');
    expect(banner.message).toBe(
      "Every readable run and checkpoint is kept. Left out (unchanged in the database): run 'r1', metrics row at step 3: its step is NaN; run '(unknown)', checkpoint 'c9': it has no run id.",
    );
    expect(dismissed).toEqual([]);
    session.dismiss(banner.id);
    expect(dismissed).toEqual([['a', 'b']]);
    expect(session.banners).toHaveLength(0);
  });

  it('a deleted checkpoint no longer holds its steps', async () => {
    const { session, trainSteps } = await fakeSession();
    await session.model.load();
    trainSteps(2);
    await session.checkpoints.save();
    await session.checkpoints.refresh();
    trainSteps(1);
    expect(session.checkpoints.unsavedSteps).toBe(1);
    await session.checkpoints.remove('r1-2');
    expect(session.checkpoints.unsavedSteps).toBe(3);
    expect(session.checkpoints.lastSaved).toBeNull();
  });

  it('loading another model asks too', async () => {
    const { session, trainSteps } = await fakeSession();
    await session.model.load();
    trainSteps(1);
    const load = session.model.load();
    expect((await discardDialog(session))?.action).toBe('load');
    session.answerDiscard('cancel');
    await load;
    expect(session.training.step).toBe(1);
  });
});

describe('session: Pause and the step under way', () => {
  it('shows "pausing" before the worker answers, and Paused when the step ends', async () => {
    const { session, emit, calls, resolvePause } = await fakeSession();
    await session.model.load();
    emit({ type: 'status', status: 'running', step: 0, steps: 200 });
    const pausing = session.training.pause();
    // Synchronously, before the worker has answered.
    expect(session.training.pausing).toBe(true);
    expect(calls).toContain('pause');
    resolvePause();
    await pausing;
    expect(session.training.pausing).toBe(true); // the step under way still runs
    emit({ type: 'status', status: 'paused', step: 1, steps: 200 });
    expect(session.training.pausing).toBe(false);
    expect(session.training.status).toBe('paused');
  });

  it('keeps one clock per step across its phases and clears it when training stops', async () => {
    const { session, emit } = await fakeSession();
    emit({ type: 'status', status: 'running', step: 0, steps: 200 });
    emit({ type: 'phase', progress: { step: 1, phase: 'sampling', done: 0, total: 80 } });
    const started = session.training.activity!.startedAt;
    await new Promise((r) => setTimeout(r, 5));
    emit({ type: 'phase', progress: { step: 1, phase: 'rewards', done: null, total: null } });
    expect(session.training.activity?.phase).toBe('rewards');
    expect(session.training.activity?.startedAt).toBe(started);
    emit({ type: 'phase', progress: { step: 2, phase: 'sampling', done: 0, total: 80 } });
    expect(session.training.activity!.startedAt).toBeGreaterThan(started);
    emit({ type: 'status', status: 'paused', step: 2, steps: 200 });
    expect(session.training.activity).toBeNull();
  });

  it('names the options that wait for a Reset', async () => {
    const { session } = await fakeSession();
    await session.model.load();
    expect(session.options.pending).toEqual([]);
    session.options.draft.numGenerations = 8;
    session.options.draft.learningRate = 1e-3;
    expect(new Set(session.options.pending)).toEqual(new Set(['numGenerations', 'learningRate']));
  });
});
