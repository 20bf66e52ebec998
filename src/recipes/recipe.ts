// RecipeRun: runs a recipe (recipe-spec.ts: what a recipe is, its parser and the built-in ones)
// stage after stage on one model, for every front end (the CLI's `npm run recipe`, the page's
// worker): one timeline of metrics rows whose step counts across stages (stage boundaries are where
// its `stage` index changes), hooks for each step, checkpoint and stage end, and a JSON state
// (`RecipeState`) that, with the current stage's last checkpoint, resumes the recipe exactly.
// Stages run through one table (STAGE_RUNNERS) from kind to runner: sft and grpo build a
// TrainingStage (stage.ts: SftRun, Run) that one loop drives without asking which it is;
// rejection-sample trains nothing and has a runner of its own.
// This is the GPU side (GpuLlama, Sampler, Run, SftRun); the page never imports it as a value.
import type { Engine } from '../engine/engine';
import type { MemoryPlan } from '../model/memory-plan';
import { mixSeeds } from '../core/rng';
import { parameterSpecs, type LlamaConfig } from '../core/model-config';
import { GpuLlama } from '../model/llama';
import { frozenDtypeOf, isPrequantised, type WeightSource } from '../model/parameters';
import { Sampler } from '../model/sampler';
import type { CheckpointPayload } from '../storage/checkpoints';
import type { Identity } from '../storage/db';
import { createTask } from '../tasks/index';
import type { Task } from '../tasks/types';
import {
  coldStartRows,
  MODEL_PREFIX,
  fullStageOnBase,
  stageConfig,
  stageTrainingOptions,
  stageRunId,
  stageSeed,
  type GrpoStage,
  type Recipe,
  type RecipeStage,
  type RecipeState,
  type RejectionStage,
  type SftStage,
  type StageKind,
  type StageResult,
  type TimelineRow,
} from './recipe-spec';
import { rejectionSample, toSftJsonl, type RejectionSamplingReport } from './rejection-sampling';
import type { SandboxFactory } from '../rewards/reward-sandbox';
import { planRunMemory, Run } from '../train/run';
import { planSftMemory, SftRun, tokenizeSftDataset } from '../train/sft';
import { resolveSftConfig } from '../train/sft-config';
import { parseSftJsonl, type SftRow } from '../train/sft-data';
import type { StageHooks, StageStepResult, TrainedWeights, TrainingStage } from '../train/stage';
import { mergedLoraWeights } from './merged-weights';
import { renderPrompt, type TrainerTokenizer } from '../grpo/trainer';

export interface StageInfo {
  index: number;
  stage: RecipeStage;
  /** The timeline step the stage starts after. */
  startStep: number;
}

export interface RecipeHooks {
  /** Before the first stage runs (and again on a resume): the memory plan of each training stage
   * still to run whose start is known now (preflight; a stage that does not fit stops the recipe
   * before it starts). */
  onPlans?(plans: StagePlan[]): void | Promise<void>;
  /** A stage begins: `steps` it trains (0 for rejection sampling); a training stage's memory
   * plan (the base's storage in plan.input.dtype). */
  onStageStart?(info: StageInfo & { steps: number; plan?: MemoryPlan }): void | Promise<void>;
  onStep?(
    row: TimelineRow,
    info: StageInfo & { steps: number; elapsedMs: number; skipped?: string | null },
  ): void | Promise<void>;
  /** A stage's checkpoint (its own codec: Run's or SftRun's payload; `config.recipe` names the
   * recipe and stage). Store it with state() to resume. */
  onCheckpoint?(
    payload: CheckpointPayload,
    info: StageInfo & { automatic: boolean },
  ): void | Promise<void>;
  onRejection?(report: RejectionSamplingReport, info: StageInfo): void | Promise<void>;
  /** After a stage: the weights it ended with (the next stage's start unless it names another). */
  onStageEnd?(
    result: StageResult,
    info: StageInfo & { weights: WeightSource; config: LlamaConfig },
  ): void | Promise<void>;
}

/** A training stage's memory plan, made before the recipe runs (RecipeRun.planStages). */
export interface StagePlan {
  index: number;
  name: string;
  plan: MemoryPlan;
}

/** What the front ends show of a stage's plan (the page's log and Start line, the CLI's). */
export interface StagePlanSummary {
  index: number;
  name: string;
  peakBytes: number;
  fits: boolean;
  /** The plan's message: what to change when it does not fit. */
  message: string;
}

export const stagePlanSummary = ({ index, name, plan }: StagePlan): StagePlanSummary => ({
  index,
  name,
  peakBytes: plan.peakBytes,
  fits: plan.fits,
  message: plan.message,
});

/** A model a stage can start from: its architecture, tokenizer and weights' identity. */
export interface RecipeModel {
  config: LlamaConfig;
  tokenizer: TrainerTokenizer;
  identity?: Identity;
}

export interface RecipeSetup {
  engine: Engine;
  recipe: Recipe;
  runId: string;
  /** The loaded model, its weights as the checkpoint stores them: a reader (streamed: stages
   * upload it tensor by tensor) or a Map of stored tensors. 16-bit stays 16-bit and a bitsandbytes
   * 4-bit checkpoint stays NF4, so a stage on it stores its base as `npm run train` would, and the
   * host never holds a widened f32 copy of the model. Only LoRA stages may train a 4-bit one. */
  base: RecipeModel & { weights: WeightSource };
  /** Loads a student model named by a stage's `"from": "model:<ref>"` (the CLI: a Hugging Face
   * folder); absent, such a stage is refused. */
  loadModel?(ref: string): Promise<RecipeModel & { weights: WeightSource }>;
  sandboxFactory: SandboxFactory;
  /** Scores GRPO rewards and verifies rejection samples when it is not the preset's task (the
   * aha preset trains on Countdown minus the held-out problems and is scored by Countdown). */
  scoringTask?: Task;
  hooks?: RecipeHooks;
  /** Continue a stored recipe: its state, the current stage's latest checkpoint (null: the stage
   * starts over), and the last checkpoint of an earlier sft / grpo stage by name, asked for only
   * when the current stage starts from that stage's weights (stageEndWeights rebuilds them). */
  resume?: {
    state: RecipeState;
    checkpoint: CheckpointPayload | null;
    checkpointOf(stageName: string): Promise<CheckpointPayload>;
  };
}

const tag = (payload: CheckpointPayload, recipe: Recipe, index: number): CheckpointPayload => ({
  ...payload,
  config: {
    ...payload.config,
    recipe: { name: recipe.name, stage: index, stageName: recipe.stages[index].name },
  },
});

/** A stage's start or end weights: the base or a student as stored (possibly a reader), or the
 * f32 weights a training stage ended with. */
type Weights = WeightSource;
type StageOf<K extends StageKind> = Extract<RecipeStage, { kind: K }>;

/** What runStage hands the runner of stage `info.index`: the stage, the model and weights it
 * starts from, and the recipe's bookkeeping bound to this stage. */
interface StageContext<S extends RecipeStage = RecipeStage> {
  recipe: Recipe;
  setup: RecipeSetup;
  hooks: RecipeHooks;
  stage: S;
  info: StageInfo;
  start: RecipeModel & { weights: Weights };
  /** The stage's checkpoint to continue from (resume), or null to start it over. */
  checkpoint: CheckpointPayload | null;
  /** performance.now() when the stage started. */
  started: number;
  /** Appends a step to the timeline and tells onStep (`steps`: the stage's total). */
  record(result: StageStepResult, steps: number, elapsedMs: number): Promise<void>;
  /** The save hook of a training stage: tags the checkpoint with the recipe and stage for
   * onCheckpoint, and notes its step. */
  onCheckpoint: NonNullable<StageHooks['onCheckpoint']>;
  /** The stage's step of its latest checkpoint (a stop saves one only past it). */
  lastSaved(): number;
  stopRequested(): boolean;
  /** The examples of an SFT stage (its own JSONL, cold-start rows, or a rejection stage's set). */
  sftRows(stage: SftStage): SftRow[];
  /** Keeps a rejection stage's set (SFT JSONL) under the stage's name for later stages. */
  keepDataset(jsonl: string): void;
  /** The result of a training stage of `steps` steps from its timeline rows. */
  stepResult(steps: number): StageResult;
}

/** A stage run to its end: the weights it ends with and its result. */
interface StageEnd {
  weights: Weights;
  result: StageResult;
}

/** Runs one kind of stage to its end, or until a stop is asked for ('stopped'). */
type StageRunner<S extends RecipeStage> = (ctx: StageContext<S>) => Promise<StageEnd | 'stopped'>;

/** Builds a training stage of one kind on the context's start weights, with the hooks given. */
type TrainingStageFactory<S extends RecipeStage> = (
  ctx: StageContext<S>,
  hooks: StageHooks,
) => Promise<TrainingStage>;

/** A stage's own run id under the recipe's. */
const stageRun = ({ setup, info }: StageContext) =>
  stageRunId(setup.runId, info.index, info.stage.name);

const sftStage: TrainingStageFactory<SftStage> = async (ctx, hooks) => {
  const { recipe, stage, info, start } = ctx;
  const config = resolveSftConfig({ seed: stageSeed(recipe, info.index), ...stage.options });
  const { examples } = tokenizeSftDataset(ctx.sftRows(stage), start.tokenizer, config);
  return SftRun.create({
    engine: ctx.setup.engine,
    runId: stageRun(ctx),
    runName: `${recipe.name} · ${stage.name}`,
    modelIdentity: start.identity,
    config,
    model: { config: start.config, weights: start.weights },
    examples,
    padTokenId: start.tokenizer.padTokenId,
    // A stage too large for the device stops the recipe with its plan before it allocates.
    mustFit: true,
    hooks,
  });
};

const grpoStage: TrainingStageFactory<GrpoStage> = async (ctx, hooks) => {
  const { recipe, stage, info, start, setup } = ctx;
  return Run.create({
    engine: setup.engine,
    config: stageConfig(recipe, info.index),
    runId: stageRun(ctx),
    runName: `${recipe.name} · ${stage.name}`,
    modelIdentity: start.identity ?? { name: recipe.name, sha256: '' },
    model: { config: start.config, weights: start.weights, tokenizer: start.tokenizer },
    scoringTask: setup.scoringTask,
    sandboxFactory: setup.sandboxFactory,
    mustFit: true,
    hooks,
  });
};

/**
 * The runner of a training kind: builds the stage with hooks that record each step and save
 * through the recipe, continues it from the checkpoint if any, and trains it to its end (its final
 * weights) or until a stop is asked for, when it saves the steps trained since the last
 * checkpoint. The stage is freed either way. Only the TrainingStage interface is used here.
 */
const training =
  <S extends RecipeStage>(build: TrainingStageFactory<S>): StageRunner<S> =>
  async (ctx) => {
    const run: TrainingStage = await build(ctx, {
      onStep: (result, { elapsedMs }) => ctx.record(result, run.totalSteps, elapsedMs),
      onCheckpoint: ctx.onCheckpoint,
    });
    try {
      if (ctx.checkpoint) run.restore(ctx.checkpoint, []);
      await ctx.hooks.onStageStart?.({ ...ctx.info, steps: run.totalSteps, plan: run.plan });
      if ((await run.runUntil(ctx.stopRequested)) === 'stopped') {
        // A pause keeps every trained step: the stage's state as a checkpoint, resume's start.
        if (run.stepCount > ctx.lastSaved()) await run.save(true);
        return 'stopped';
      }
      const weights = stageEndWeights(
        ctx.recipe,
        ctx.info.index,
        ctx.start,
        await run.readTrained(),
      );
      return { weights, result: ctx.stepResult(run.totalSteps) };
    } finally {
      run.destroy();
    }
  };

/**
 * Training stage `index`'s end weights from what it trained: a full stage's parameters, or a LoRA
 * stage's start weights as it stored its frozen base (its dtype: bf16 or f16 rounded, NF4
 * quantised) with its adapters merged in, read a tensor at a time (mergedLoraWeights), so the
 * host holds the adapters, never the merged model. A resumed recipe rebuilds a LoRA stage's from
 * the adapters its checkpoint holds, through this same function.
 */
function stageEndWeights(
  recipe: Recipe,
  index: number,
  start: RecipeModel & { weights: Weights },
  trained: TrainedWeights,
): Weights {
  if (trained.kind === 'full') return trained.weights;
  const { dtype, useBnbNestedQuant } = stageTrainingOptions(recipe, index);
  const frozen = frozenDtypeOf(dtype, start.config, start.weights);
  const nf4 = { nested: useBnbNestedQuant };
  return mergedLoraWeights(
    start.config,
    start.weights,
    frozen,
    nf4,
    trained.lora,
    trained.adapters,
  );
}

/**
 * The runner of a rejection-sample stage, which trains nothing (no optimizer, no steps): samples
 * the stage's prompts on its start weights, keeps the verified completions as an SFT set for later
 * stages, and passes its start weights through.
 */
const rejectionSampleStage: StageRunner<RejectionStage> = async (ctx) => {
  const { recipe, setup, stage, info, start } = ctx;
  const config = stageConfig(recipe, info.index);
  const task = createTask(config.task, config.taskOptions);
  const verifier = setup.scoringTask ?? task;
  const seed = stage.options.seed ?? stageSeed(recipe, info.index);
  const problems = task.generate(mixSeeds(seed, 0x5e1ec7), stage.prompts);
  // Stored as the stage's dtype says (a 4-bit checkpoint stays NF4), as a GRPO stage would.
  const options = { frozenDtype: frozenDtypeOf(config.dtype, start.config, start.weights) };
  const model = await GpuLlama.loadFrom(setup.engine, start.config, start.weights, options);
  let report: RejectionSamplingReport;
  try {
    await ctx.hooks.onStageStart?.({ ...info, steps: 0 });
    report = await rejectionSample(
      {
        generator: new Sampler(setup.engine, model),
        tokenizer: start.tokenizer,
        task: verifier,
        renderPrompt: (p) => renderPrompt(task, start.tokenizer, p, config.template, config),
      },
      problems,
      {
        maxCompletionLength: config.maxCompletionLength,
        temperature: config.temperature,
        ...stage.options,
        seed,
      },
    );
  } finally {
    model.destroy();
  }
  ctx.keepDataset(toSftJsonl(report));
  await ctx.hooks.onRejection?.(report, info);
  const result: StageResult = {
    stage: info.index,
    name: stage.name,
    kind: stage.kind,
    steps: 0,
    endStep: info.startStep,
    seconds: (performance.now() - ctx.started) / 1000,
    rejection: {
      sampled: report.sampled,
      kept: report.kept,
      yield: report.yield,
      perPrompt: report.perPrompt.map((p) => ({ ...p })),
    },
  };
  return { weights: start.weights, result };
};

/** How each kind of stage runs: the training kinds through their TrainingStage's factory. */
const STAGE_RUNNERS: { [K in StageKind]: StageRunner<StageOf<K>> } = {
  sft: training(sftStage),
  grpo: training(grpoStage),
  'rejection-sample': rejectionSampleStage,
};

export class RecipeRun {
  readonly recipe: Recipe;
  readonly hooks: RecipeHooks;
  private state: RecipeState;
  /** Final weights of finished stages (sft / grpo) kept for the stages that start from them. */
  private readonly weights = new Map<string, Weights>();
  private readonly students = new Map<string, RecipeModel & { weights: Weights }>();
  private stopRequested = false;

  constructor(private readonly setup: RecipeSetup) {
    this.recipe = setup.recipe;
    this.hooks = setup.hooks ?? {};
    this.state = setup.resume
      ? structuredClone(setup.resume.state)
      : { recipe: setup.recipe, stageIndex: 0, results: [], datasets: {}, timeline: [] };
    if (setup.resume && JSON.stringify(setup.resume.state.recipe) !== JSON.stringify(setup.recipe))
      throw new Error('recipe: the stored state belongs to another recipe');
    const full = isPrequantised(setup.base.weights) ? fullStageOnBase(setup.recipe) : null;
    if (full) {
      throw new Error(
        `Stage '${full.name}' would fully fine-tune the loaded model, a 4-bit (NF4) quantised ` +
          'checkpoint, which a full fine-tune cannot train. Turn LoRA (usePeft) on in its options ' +
          'to train adapters on the frozen 4-bit base.',
      );
    }
  }

  /** A copy of the progress so far (JSON). */
  snapshot(): RecipeState {
    return structuredClone(this.state);
  }

  get finished(): boolean {
    return this.state.stageIndex >= this.recipe.stages.length;
  }

  /** Asks the stage under way to stop after its current step (resume continues from its last
   * checkpoint). */
  stop(): void {
    this.stopRequested = true;
  }

  /** Where stage `index` starts: 'base', 'model:<ref>', or the weight-producing stage's name. */
  private sourceOf(index: number): string {
    const stages = this.recipe.stages;
    let from = stages[index].from ?? 'previous';
    if (from === 'previous') from = index === 0 ? 'base' : stages[index - 1].name;
    // A rejection-sample stage passes its own starting weights through.
    while (from !== 'base' && !from.startsWith(MODEL_PREFIX)) {
      const i = stages.findIndex((s) => s.name === from);
      if (stages[i].kind !== 'rejection-sample') break;
      from = this.sourceOf(i);
    }
    return from;
  }

  /** The architecture and tokenizer behind a source: the base model's, a student's, or (for a
   * stage) those of the model its own chain of stages started from. */
  private async modelOf(source: string): Promise<RecipeModel> {
    const { base } = this.setup;
    if (source === 'base') return base;
    if (source.startsWith(MODEL_PREFIX)) return this.student(source.slice(MODEL_PREFIX.length));
    return this.modelOf(this.sourceOf(this.recipe.stages.findIndex((s) => s.name === source)));
  }

  /** A student model named by `from: "model:<ref>"`, loaded once; its tokenizer must be the
   * base model's (distillation trains it on the teacher's token sequences as text). */
  private async student(ref: string): Promise<RecipeModel & { weights: Weights }> {
    const cached = this.students.get(ref);
    if (cached) return cached;
    if (!this.setup.loadModel)
      throw new Error(`recipe: this front end cannot load the model '${ref}' ("from": "model:…")`);
    const model = await this.setup.loadModel(ref);
    const probe = coldStartRows(0, 1)[0] as { prompt: string; completion: string };
    const text = probe.prompt + probe.completion;
    const same = (a: TrainerTokenizer, b: TrainerTokenizer) =>
      JSON.stringify(a.encode(text)) === JSON.stringify(b.encode(text)) &&
      JSON.stringify(a.eosTokenIds) === JSON.stringify(b.eosTokenIds) &&
      a.padTokenId === b.padTokenId;
    if (!same(model.tokenizer, this.setup.base.tokenizer))
      throw new Error(
        `recipe: the model '${ref}' has another tokenizer than the recipe's model (distillation here needs the same one)`,
      );
    this.students.set(ref, model);
    return model;
  }

  private async startWeights(index: number): Promise<RecipeModel & { weights: Weights }> {
    const source = this.sourceOf(index);
    const model = await this.modelOf(source);
    if (source === 'base') return this.setup.base;
    if (source.startsWith(MODEL_PREFIX)) return this.student(source.slice(MODEL_PREFIX.length));
    const kept = this.weights.get(source);
    if (kept) return { ...model, weights: kept };
    if (!this.setup.resume) throw new Error(`recipe: no weights of stage '${source}'`);
    const loaded = await this.resumedEndWeights(
      source,
      await this.setup.resume.checkpointOf(source),
    );
    this.weights.set(source, loaded);
    return { ...model, weights: loaded };
  }

  /**
   * A finished stage's end weights from its last checkpoint, as the stage handed them on when it
   * ended (stageEndWeights): every parameter; or, for a LoRA stage, whose checkpoint holds only
   * adapters, its start weights with those adapters merged in.
   */
  private async resumedEndWeights(source: string, payload: CheckpointPayload): Promise<Weights> {
    const tensors = new Map(
      payload.tensors.filter((t) => !t.name.startsWith('optimizer.')).map((t) => [t.name, t.data]),
    );
    if (!payload.adapter) return tensors;
    const index = this.recipe.stages.findIndex((s) => s.name === source);
    const start = await this.startWeights(index);
    return stageEndWeights(this.recipe, index, start, {
      kind: 'lora',
      lora: payload.adapter,
      adapters: tensors,
    });
  }

  /**
   * The memory plan of every training stage still to run, as that stage will check it when it
   * starts (Run / SftRun with mustFit): on the weights it starts from, the loaded model's as
   * stored, or a training stage's end (f32 values, whether merged adapters or trained
   * parameters). Stages whose start is not known yet are left to their own check: those on a
   * student model (`"from": "model:…"` and the stages after it; the student loads when its stage
   * starts) and SFT stages on the set of a rejection stage that has not run.
   */
  async planStages(): Promise<StagePlan[]> {
    const { engine } = this.setup;
    const limits = engine.device.limits;
    const kernels = engine.pipelines.tuning;
    const plans: StagePlan[] = [];
    for (let i = this.state.stageIndex; i < this.recipe.stages.length; i++) {
      const stage = this.recipe.stages[i];
      if (stage.kind === 'rejection-sample') continue;
      if (this.rootOf(i) !== 'base') continue;
      const source = this.sourceOf(i);
      const model = await this.modelOf(source);
      const weights = source === 'base' ? this.setup.base.weights : this.plannedEnd(source, model);
      let plan: MemoryPlan;
      if (stage.kind === 'grpo') {
        const config = stageConfig(this.recipe, i);
        plan = planRunMemory(model.config, config, limits, undefined, weights, kernels);
      } else {
        const data = stage.data;
        if ('stage' in data && this.state.datasets[data.stage] === undefined) continue;
        const config = resolveSftConfig({ seed: stageSeed(this.recipe, i), ...stage.options });
        const { examples } = tokenizeSftDataset(this.sftRows(stage), model.tokenizer, config);
        plan = planSftMemory(model.config, config, examples, weights, limits, undefined, kernels);
      }
      plans.push({ index: i, name: stage.name, plan });
    }
    return plans;
  }

  /** The model stage `index`'s chain of starts leads back to: 'base' or 'model:<ref>'. */
  private rootOf(index: number): string {
    const source = this.sourceOf(index);
    if (source === 'base' || source.startsWith(MODEL_PREFIX)) return source;
    return this.rootOf(this.recipe.stages.findIndex((s) => s.name === source));
  }

  /** The end weights of training stage `source` for planning: kept when it has run, else as
   * their storage will be (f32 values: a LoRA stage's merged, a full stage's trained). */
  private plannedEnd(source: string, model: RecipeModel): Weights {
    const kept = this.weights.get(source);
    if (kept) return kept;
    const f32 = new Map(parameterSpecs(model.config).map((spec) => [spec.name, 'F32']));
    return {
      storedDtypes: f32,
      read: () => Promise.reject(new Error(`recipe: stage '${source}' has not run`)),
    };
  }

  /** Runs the remaining stages (or until stop()). A training stage still to run that does not
   * fit the device (planStages) stops the recipe before any stage runs. */
  async run(): Promise<'finished' | 'stopped'> {
    this.stopRequested = false;
    const plans = await this.planStages();
    await this.hooks.onPlans?.(plans);
    const over = plans.find((p) => !p.plan.fits);
    if (over) {
      throw new Error(
        `Stage '${over.name}' (${over.index + 1} of ${this.recipe.stages.length}) would not fit ` +
          `on this GPU, so the recipe stops before running a stage: ${over.plan.message}`,
      );
    }
    while (!this.finished) {
      const index = this.state.stageIndex;
      const checkpoint =
        this.setup.resume && index === this.setup.resume.state.stageIndex
          ? this.setup.resume.checkpoint
          : null;
      const outcome = await this.runStage(index, checkpoint);
      if (outcome === 'stopped') return 'stopped';
    }
    return 'finished';
  }

  private async runStage(
    index: number,
    checkpoint: CheckpointPayload | null,
  ): Promise<'finished' | 'stopped'> {
    const stage = this.recipe.stages[index];
    const started = performance.now();
    // Rows of this stage recorded before a resume are kept up to the checkpoint's step.
    const keep = checkpoint?.step ?? 0;
    this.state.timeline = this.state.timeline.filter(
      (r) => r.stage < index || (r.stage === index && r.stageStep <= keep),
    );
    const startStep = this.state.timeline.filter((r) => r.stage < index).at(-1)?.step ?? 0;
    const info: StageInfo = { index, stage, startStep };
    const start = await this.startWeights(index);
    let lastSaved = checkpoint?.step ?? 0;
    const ctx: StageContext = {
      recipe: this.recipe,
      setup: this.setup,
      hooks: this.hooks,
      stage,
      info,
      start,
      checkpoint,
      started,
      record: async ({ step: stageStep, metrics, skipped }, steps, elapsedMs) => {
        const row: TimelineRow = { step: startStep + stageStep, stage: index, stageStep, metrics };
        this.state.timeline.push(row);
        await this.hooks.onStep?.(row, { ...info, steps, elapsedMs, skipped });
      },
      onCheckpoint: (payload, { automatic }) => {
        lastSaved = payload.step;
        return this.hooks.onCheckpoint?.(tag(payload, this.recipe, index), { ...info, automatic });
      },
      lastSaved: () => lastSaved,
      stopRequested: () => this.stopRequested,
      sftRows: (s) => this.sftRows(s),
      keepDataset: (jsonl) => {
        this.state.datasets[stage.name] = jsonl;
      },
      stepResult: (steps) => this.stepResult(index, steps, started),
    };
    // The one dispatch on the stage's kind (a correlated union TypeScript cannot follow).
    const end = await (STAGE_RUNNERS[stage.kind] as StageRunner<RecipeStage>)(ctx);
    if (end === 'stopped') return 'stopped';
    const { weights, result } = end;
    this.weights.set(stage.name, weights);
    this.state.results = this.state.results.filter((r) => r.stage !== index).concat(result);
    this.state.stageIndex = index + 1;
    await this.hooks.onStageEnd?.(result, { ...info, weights, config: start.config });
    return 'finished';
  }

  private stepResult(index: number, steps: number, started: number): StageResult {
    const stage = this.recipe.stages[index];
    const rows = this.state.timeline.filter((r) => r.stage === index);
    return {
      stage: index,
      name: stage.name,
      kind: stage.kind,
      steps,
      endStep: rows.at(-1)?.step ?? 0,
      seconds: (performance.now() - started) / 1000,
      last: rows.at(-1)?.metrics,
    };
  }

  private sftRows(stage: SftStage): SftRow[] {
    const data = stage.data;
    if ('coldStart' in data) return coldStartRows(this.recipe.seed, data.coldStart.count);
    const text = 'stage' in data ? this.state.datasets[data.stage] : data.jsonl;
    if (text === undefined)
      throw new Error(
        `recipe: stage '${stage.name}' needs the set of '${(data as { stage: string }).stage}', which has not run`,
      );
    const { rows, issues } = parseSftJsonl(text);
    if (issues.length)
      throw new Error(
        `recipe: stage '${stage.name}': line ${issues[0].line}: ${issues[0].message}`,
      );
    if (rows.length === 0)
      throw new Error(
        `recipe: stage '${stage.name}' has no examples${'stage' in data ? ` (rejection stage '${data.stage}' kept none: sample more prompts or train the model longer first)` : ''}`,
      );
    return rows;
  }
}
