// The trainer worker's checkpoint service: save the run, list, restore (the base model checked
// first, custom reward code only with the page's consent), rename, delete, export and import
// checkpoint files, and what the browser's storage holds (usage, rows it could not read).
import { checkBaseModel } from '../train/checkpoint';
import { resolveConfig } from '../grpo/config';
import {
  customRewardCode,
  withoutCustomRewards,
  type CustomCodeConsent,
} from '../rewards/reward-id';
import type { LoadedCheckpoint } from '../storage/checkpoints';
import type { StorageNotice } from '../storage/notices';
import { checkpointInfo, message, type WorkerContext } from './context';
import type { CheckpointInfo, RunState, StorageInfo } from './protocol';

/**
 * The playground continues GRPO runs: a recipe's SFT stage checkpoint is refused with where it
 * can go on (the Recipes view resumes its recipe; export takes it elsewhere), not with the GRPO
 * config's 'unknown key'.
 */
function checkPlaygroundRun(config: Record<string, unknown>): void {
  if (config.stage !== 'sft') return;
  const tag = config.recipe as { name?: string; stageName?: string } | undefined;
  const where = tag?.name ? ` (stage '${tag.stageName}' of recipe '${tag.name}')` : '';
  throw new Error(
    `This checkpoint is an SFT stage's${where}: the playground continues GRPO runs. Resume its ` +
      'recipe in the Recipes view, or export the checkpoint.',
  );
}

/** A loaded (verified) checkpoint as the parity tests compare it. */
const digest = (c: LoadedCheckpoint) => ({
  step: c.step,
  optimizerStep: c.optimizerStep,
  adapter: c.adapter,
  tensorSha256: c.tensorSha256,
  metricsSoFar: c.metricsSoFar,
});

export function checkpointService(ctx: WorkerContext) {
  return {
    async saveCheckpoint(): Promise<CheckpointInfo> {
      const r = ctx.requireRun();
      const before = r.lastCheckpoint;
      await r.run.save(false);
      if (!r.lastCheckpoint || r.lastCheckpoint === before)
        throw new Error('The checkpoint was not saved.');
      return r.lastCheckpoint;
    },

    async listCheckpoints(): Promise<CheckpointInfo[]> {
      const s = await ctx.storage();
      const runs = new Map((await s.listRuns()).map((r) => [r.id, r.name]));
      const records = await s.listCheckpoints();
      return records
        .map((c) => checkpointInfo(c, runs.get(c.runId) ?? c.runId))
        .sort((a, b) => b.createdAt - a.createdAt);
    },

    /** Why this checkpoint cannot be restored on the loaded model (naming both models), or null:
     * the page asks this before its discard question, so a refusal costs the user nothing. */
    async restoreProblem(id: string): Promise<string | null> {
      const model = ctx.model;
      if (!model) return 'Load the model this checkpoint was trained from first.';
      try {
        const base = await (await ctx.storage()).checkpointBase(id);
        checkBaseModel(base, model.identity, model.label, model.hf.config);
        checkPlaygroundRun(base.config);
        return null;
      } catch (err) {
        return message(err);
      }
    },

    /** Continues a saved run: the same base model must be loaded (it is the reference policy). */
    async restoreCheckpoint(
      id: string,
      jsonlText?: string,
      consent?: CustomCodeConsent,
    ): Promise<RunState> {
      ctx.requireIdle('Pause training before restoring.');
      const model = ctx.requireModel('Load the model this checkpoint was trained from first.');
      const s = await ctx.storage();
      const loaded = await s.loadCheckpoint(id);
      checkBaseModel(loaded, model.identity, model.label, model.hf.config);
      checkPlaygroundRun(loaded.config);
      // A recipe's GRPO stage continues here as a GRPO run: its config without the recipe's tag.
      const { recipe: recipeTag, ...runConfig } = loaded.config;
      // Custom reward code from storage runs only with the page's consent (none asked: left out).
      const code = customRewardCode(runConfig);
      const allowed = Object.keys(code).length === 0 || (!!consent && (await consent(code)));
      const config = resolveConfig(allowed ? runConfig : withoutCustomRewards(runConfig));
      const runRecord = await s.getRun(loaded.runId);
      const name = runRecord?.name ?? loaded.runName ?? loaded.runId;
      // A recipe stage's run continues as a run of its own: checkpoints saved under the stage's
      // id would become the stage's latest, which its recipe resumes from and hands on.
      const ids = recipeTag
        ? { id: ctx.newRunIds(config).id, name: `${name} (continued)` }
        : { id: loaded.runId, name };
      const r = await ctx.restoredRun(loaded, jsonlText, ids, undefined, config);
      ctx.lost = false;
      r.lastCheckpoint = checkpointInfo(loaded, name);
      const state = ctx.adopt(r);
      ctx.setStatus('paused');
      return state;
    },

    async renameRun(runId: string, name: string): Promise<void> {
      await (await ctx.storage()).renameRun(runId, name);
      if (ctx.run?.run.id === runId) ctx.run.run.name = name.trim();
      ctx.history.rename(runId, name.trim());
    },

    async deleteCheckpoint(id: string): Promise<void> {
      await (await ctx.storage()).deleteCheckpoint(id);
      if (ctx.run?.lastCheckpoint?.id === id) ctx.run.lastCheckpoint = null;
    },

    async exportCheckpoint(id: string): Promise<{ blob: Blob; fileName: string }> {
      return (await ctx.storage()).exportCheckpointBlob(id);
    },

    async importCheckpoint(file: Blob): Promise<CheckpointInfo> {
      const result = await (
        await ctx.storage()
      ).importCheckpoint(file, { fileName: (file as File).name || undefined });
      return checkpointInfo(result.checkpoint, result.run.name);
    },

    async storageInfo(): Promise<StorageInfo> {
      const report = await (await ctx.storage()).storageUsage();
      return {
        usage: report.known ? report.usageBytes : null,
        quota: report.known ? report.quotaBytes : null,
        checkpointCount: report.checkpointCount,
        checkpointBytes: report.checkpointBytes,
      };
    },

    /** Stored rows left out because they could not be read (schema upgrade, run listings), for
     * the page's banner; each until dismissed. */
    async storageNotices(): Promise<StorageNotice[]> {
      return (await ctx.storage()).storageNotices();
    },

    /** Dismisses the notices with these keys (default all); returns how many were dismissed. */
    async dismissStorageNotices(keys?: string[]): Promise<number> {
      return (await ctx.storage()).dismissStorageNotices(keys);
    },

    /**
     * Test hook (reached from the page only with ?test-hooks=1): a stored checkpoint as the parity
     * tests compare it, loaded and verified: each tensor's SHA-256 (weights or adapters, AdamW
     * moments), the optimizer step, the adapter config and the metrics rows it carries.
     */
    async checkpointDigest(id: string) {
      return digest(await (await ctx.storage()).loadCheckpoint(id));
    },

    /** Test hook (?test-hooks=1): checkpointDigest of a run's newest checkpoint (a recipe stage's
     * run id included), or null when it has none. */
    async latestCheckpointDigest(runId: string) {
      const c = await (await ctx.storage()).loadLatestCheckpoint(runId);
      return c ? digest(c) : null;
    },
  };
}
