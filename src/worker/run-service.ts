// The trainer worker's run service: the playground's GRPO run on the loaded model (grpo's Run, the
// loop the CLI shares): configure, Step, Run until done or paused, live options, Reset, recovery
// after a device loss, and the test hooks that read or break the run on purpose.
import { resolveConfig, type ConfigInput } from '../grpo/config';
import { scoreCompletions } from '../grpo/score-completions';
import { TrainingDivergedError } from '../grpo/trainer';
import { message, runState, type WorkerContext } from './context';
import type { RunState } from './protocol';

export function runService(ctx: WorkerContext) {
  /** Refuses a playground step while a recipe trains: one training loop on the GPU at a time. */
  const requireGpuFree = () => {
    const recipe = ctx.recipeBusy();
    if (recipe) throw new Error(recipe);
  };

  return {
    /** A new run (step 0, the loaded weights) with `config`. */
    async configure(config: Partial<ConfigInput>, jsonlText?: string): Promise<RunState> {
      ctx.requireIdle('Pause training before changing the run.');
      const resolved = resolveConfig(config);
      const state = ctx.adopt(await ctx.buildRun(resolved, jsonlText, ctx.newRunIds(resolved)));
      ctx.setStatus('ready');
      return state;
    },

    /** One GRPO step; its report reaches the page once, as the 'step' event. */
    async step(): Promise<{ step: number }> {
      const r = ctx.requireRun();
      ctx.requireIdle('Already running.');
      requireGpuFree();
      ctx.setStatus('running');
      try {
        return { step: await ctx.oneStep(r) };
      } finally {
        ctx.applyQueuedOptions(r);
        if (!ctx.lost) ctx.setStatus('paused');
      }
    },

    /**
     * The options of `config` that can change in the middle of the run (Run.liveOptions), applied
     * from its next step without a Reset; any other difference from the run's config is refused
     * with its names. While a step runs (Step or Run) they wait for its end: the promise settles
     * once they are applied, before the next step starts (or when training stops).
     */
    async applyOptions(config: Partial<ConfigInput>): Promise<RunState> {
      const r = ctx.requireRun();
      const next = resolveConfig(config);
      if (ctx.status === 'running') return ctx.queueOptions(next);
      r.run.applyLiveOptions(next);
      // The status event carries the step count against the (maybe changed) steps.
      ctx.setStatus(ctx.status);
      return runState(r);
    },

    /** Runs until config.steps, pause() or an error; returns when it stops. */
    async run(): Promise<{ step: number; stopped: 'paused' | 'finished' | 'error' | 'lost' }> {
      const r = ctx.requireRun();
      ctx.requireIdle('Already running.');
      requireGpuFree();
      ctx.pauseRequested = false;
      ctx.setStatus('running');
      let stopped: 'paused' | 'finished' | 'error' | 'lost' = 'paused';
      try {
        const end = await r.run.runUntil(() => {
          // Between steps: options asked for during the last one apply from the next.
          ctx.applyQueuedOptions(r);
          return ctx.pauseRequested;
        });
        if (end === 'finished') stopped = 'finished';
      } catch (err) {
        stopped = ctx.lost ? 'lost' : 'error';
        // As a single Step's failure is (ctx.oneStep): the page shows why the run stopped.
        if (!ctx.lost)
          ctx.emit({
            type: 'error',
            message: message(err),
            diverged: err instanceof TrainingDivergedError,
          });
      }
      ctx.applyQueuedOptions(r);
      if (ctx.lost) stopped = 'lost';
      else ctx.setStatus('paused');
      return { step: r.run.stepCount, stopped };
    },

    /** Stops the run loop after the current step. */
    pause(): void {
      ctx.pauseRequested = true;
    },

    /** Back to step 0 with the loaded weights and the same config (a new run id). */
    async reset(jsonlText?: string): Promise<RunState> {
      ctx.requireIdle('Pause training before resetting.');
      const config = ctx.requireRun().run.config;
      const state = ctx.adopt(await ctx.buildRun(config, jsonlText, ctx.newRunIds(config)));
      ctx.setStatus('ready');
      return state;
    },

    /** After a device loss: a new device, the run rebuilt, and its latest checkpoint restored. */
    async recover(jsonlText?: string): Promise<RunState | null> {
      ctx.engine = null;
      ctx.lost = false;
      if (!ctx.model || !ctx.run) {
        // Nothing was loaded on the lost device: a new one is all it takes.
        await ctx.getEngine();
        ctx.setStatus('no-model');
        return null;
      }
      const { run: old, lastCheckpoint: ckpt } = ctx.run;
      const ids = { id: old.id, name: old.name ?? old.id };
      const fresh = ckpt
        ? await ctx.restoredRun(
            await (await ctx.storage()).loadCheckpoint(ckpt.id),
            jsonlText,
            ids,
            old.history,
            // The run's own config: custom code declined at restore stays out after a device loss.
            old.config,
          )
        : await ctx.buildRun(old.config, jsonlText, ids);
      fresh.lastCheckpoint = ckpt;
      const state = ctx.adopt(fresh);
      ctx.setStatus(fresh.run.stepCount > 0 ? 'paused' : 'ready');
      return state;
    },

    /**
     * Test hook (reached from the page only with ?test-hooks=1): teacher-forced log-probs of
     * `completions` after `prompts` (token ids) under the run's current policy, through the
     * update's scoring kernels (grpo/score-completions.ts). Changes nothing in the run.
     */
    async scoreCompletions(prompts: number[][], completions: number[][]): Promise<Float32Array[]> {
      const r = ctx.requireRun().run;
      ctx.requireIdle('Pause training first.');
      return scoreCompletions(await ctx.getEngine(), r.trainer.policy, prompts, completions, {
        padId: ctx.requireModel().tokenizer.padTokenId,
        temperature: r.config.temperature,
      });
    },

    /**
     * Test hook (reached from the page only with ?test-hooks=1): destroys the GPU device the way a
     * driver reset would end it, so the engine's typed 'device-lost' event and the resume path run.
     */
    async loseDevice(): Promise<void> {
      const engine = ctx.engine;
      if (!engine || engine.gpu.lost) throw new Error('There is no GPU device to lose.');
      ctx.requireIdle('Pause training first.');
      // device.destroy() directly: GpuContext.destroy() marks the loss as ours and stays silent.
      engine.gpu.device.destroy();
    },

    /**
     * Test hook (as loseDevice): an invalid command nobody captures (a copy within one buffer), as
     * an engine bug would raise, so the uncaptured-GPU-error end of the device and its banner run.
     */
    async raiseGpuError(): Promise<void> {
      const engine = ctx.engine;
      if (!engine || engine.gpu.lost) throw new Error('There is no GPU device to fail.');
      ctx.requireIdle('Pause training first.');
      const { device } = engine;
      const buffer = device.createBuffer({
        size: 16,
        usage: GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
        label: 'test-hooks.gpu-error',
      });
      const encoder = device.createCommandEncoder();
      encoder.copyBufferToBuffer(buffer, 0, buffer, 0, 4);
      device.queue.submit([encoder.finish()]);
    },
  };
}
