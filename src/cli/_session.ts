// Shared setup of the Node command lines (train, eval, aha): resolve the model folder, load the
// model and tokenizer from disk, read a task's files, open the GPU, and the model files a
// checkpoint folder carries. (createTrainer builds a bare
// trainer for the benchmarks; the commands train through grpo's Run.)
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { toHfConfig } from '../core/model-config';
import {
  BUNDLED_MODELS,
  DEFAULT_BUNDLED,
  bundledPath,
  isBundledName,
  type BundledName,
} from '../core/bundled-models';
import { createEngine, type Engine } from '../engine/engine';
import { describeMatmulChoice, sweepMatmulForModel } from '../kernels/matmul-sweep';
import { exportDtypeOf, exportHfFolder, generationConfig } from '../export/hf-export';
import { exportPeftAdapter, type LoraWeights } from '../export/peft-adapter';
import type { GpuLlama } from '../model/llama';
import { createCustomRewards, customRewardResolver } from '../rewards/custom-reward';
import { nodeSandboxFactory } from '../rewards/reward-sandbox-node';
import { createRewardFunctions, type RewardFunction } from '../rewards/rewards';
import type { Config } from '../grpo/config';
import { GrpoTrainer } from '../grpo/trainer';
import {
  loadHfFolder,
  openHfFolder,
  readWeights,
  type LoadedHfModel,
  type OpenedHfModel,
  type StoredWeight,
} from '../formats/hf-folder';
import { readerIdentity, weightsIdentity } from '../train/checkpoint';
import type { Identity } from '../storage/db';
import { folderSource } from '../formats/model-source';
import { loadTokenizer, type Tokenizer } from '../formats/tokenizer';
import { createTask } from '../tasks/index';
import type { Task } from '../tasks/types';
import { datasetFiles, importOrExplain } from './_dataset';

/** The repository root: the nearest folder above this module with a package.json (the bundled
 * CLI lives in dist-cli/ or dist-cli/assets/, depending on how the build splits chunks). */
export const REPO_ROOT = (() => {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(resolve(dir, 'package.json')) && dirname(dir) !== dir) dir = dirname(dir);
  return dir;
})();

/** A model shipped with the app: its folder under public/models/. */
export function bundledModelDir(name: BundledName = DEFAULT_BUNDLED): string {
  return resolve(REPO_ROOT, 'public', bundledPath(name));
}

/** The model shipped with the app, used when config.model is 'bundled'. */
export const BUNDLED_MODEL_DIR = bundledModelDir();

/** A --model value's folder: 'bundled' (the default bundled model) or a bundled model's name
 * ('tiny-student') is the shipped folder, whatever the working folder holds ('./tiny-student'
 * names a local folder of that name); anything else is a local Hugging Face folder. */
export function modelFolder(model: string): string {
  if (model === 'bundled') return BUNDLED_MODEL_DIR;
  if (isBundledName(model)) return bundledModelDir(model);
  const folder = resolve(model);
  if (!existsSync(folder)) {
    throw new Error(
      `model folder '${model}' does not exist (the command line loads local Hugging Face folders; 'bundled' is the shipped model, ${BUNDLED_MODELS.map((n) => `'${n}'`).join(' and ')} the bundled ones by name)`,
    );
  }
  return folder;
}

export interface LoadedModel {
  folder: string;
  hf: LoadedHfModel;
  tokenizer: Tokenizer;
}

/** A JSON file's bytes as the commands write them (two-space indent, final newline). */
export const jsonBytes = (value: unknown): Uint8Array =>
  new TextEncoder().encode(JSON.stringify(value, null, 2) + '\n');

/** A Hugging Face folder's files other than the weights (config, generation config, tokenizer,
 * as exportHfFolder writes them), so that a checkpoint folder loads in PyTorch as a model. */
export function hfFolderExtras(model: ModelFolder): Map<string, Uint8Array> {
  return new Map([
    ['config.json', jsonBytes(toHfConfig(model.hf.config))],
    ['generation_config.json', jsonBytes(generationConfig(model.hf.config, model.hf.generation))],
    ...model.hf.tokenizerFiles,
  ]);
}

/**
 * A trained policy's weights as a Hugging Face folder's files (train's --export and best-model/,
 * sft's final-model/). A LoRA run's folder holds the merged weights (W + s·B·A: the trained model, loadable without PEFT) and,
 * under `adapter/`, the PEFT adapter folder (`PeftModel.from_pretrained(base, <folder>/adapter)`).
 */
export async function trainedModelFiles(
  policy: GpuLlama,
  model: ModelFolder,
): Promise<Map<string, Uint8Array>> {
  const lora: LoraWeights | null = policy.lora
    ? { options: policy.lora, adapters: await policy.readAdapters() }
    : null;
  const files = exportHfFolder({
    config: model.hf.config,
    tensors: await policy.readParameters(),
    lora,
    tokenizerFiles: model.hf.tokenizerFiles,
    generation: model.hf.generation,
    // An NF4 base exports its merged weights as bf16 (F32 otherwise: exact).
    dtype: exportDtypeOf(policy.parameters.dtypes.values()),
  });
  if (lora) {
    const adapter = exportPeftAdapter({
      config: model.hf.config,
      lora,
      baseModelNameOrPath: model.folder,
    });
    for (const [name, bytes] of adapter) files.set(`${ADAPTER_FOLDER}/${name}`, bytes);
  }
  return files;
}

/** The PEFT adapter's subfolder in a LoRA run's exported model folders. */
export const ADAPTER_FOLDER = 'adapter';

/**
 * A model folder opened for a streamed load (train): config, tokenizer and a WeightReader; its
 * weights are read tensor by tensor as the run uploads them (Run.create), never all at once.
 * Commands that need every weight on the host (eval, sft, recipes, export) use loadModel.
 */
export interface OpenedModel {
  folder: string;
  hf: OpenedHfModel;
  tokenizer: Tokenizer;
}

/** What the train loop reads of a model besides its weights (a LoadedModel or an OpenedModel). */
export interface ModelFolder {
  folder: string;
  hf: Pick<LoadedHfModel, 'config' | 'tokenizerFiles' | 'generation'>;
  tokenizer: Tokenizer;
}

/** Opens `model` (a folder or bundled name) for a streamed load; close hf.weights when done. */
export async function openModel(model: string): Promise<OpenedModel> {
  const folder = modelFolder(model);
  const hf = await openHfFolder(folderSource(folder));
  try {
    await tuneMatmul(openedEngine, (loadedConfig = hf.config));
    const tokenizer = await loadTokenizer(hf.tokenizerFiles, {
      eosTokenIds: hf.generation.eosTokenIds,
    });
    return { folder, hf, tokenizer };
  } catch (err) {
    await hf.weights.close();
    throw err;
  }
}

/**
 * The weights a run or recipe starts from: an opened model's reader (streamed as stored: a bitsandbytes
 * 4-bit checkpoint stays NF4, 16-bit stays 16-bit); a loaded model's f32 tensors, except for a
 * bitsandbytes 4-bit checkpoint, whose weights are read again as stored (NF4), so that its base
 * stays 4-bit and a full fine-tune is refused (Run: checkQuantisedBase), as in the page.
 */
export async function modelWeights(
  model: LoadedModel | OpenedModel,
): Promise<ReadonlyMap<string, StoredWeight> | OpenedModel['hf']['weights']> {
  if ('weights' in model.hf) return model.hf.weights;
  if (![...model.hf.storedDtypes.values()].includes('NF4')) return model.hf.tensors;
  const { weights } = await openHfFolder(folderSource(model.folder), { requireTokenizer: false });
  try {
    return await readWeights(weights, 'stored');
  } finally {
    await weights.close();
  }
}

/** weightsIdentity of a model's weights (the digest is the same for either form; an opened
 * model's are hashed tensor by tensor as read). */
export function modelIdentity(model: LoadedModel | OpenedModel): Promise<Identity> {
  return 'weights' in model.hf
    ? readerIdentity(model.folder, model.hf.weights)
    : weightsIdentity(model.folder, model.hf.tensors);
}

export async function loadModel(model: string): Promise<LoadedModel> {
  const folder = modelFolder(model);
  const hf = await loadHfFolder(folderSource(folder));
  await tuneMatmul(openedEngine, (loadedConfig = hf.config));
  const tokenizer = await loadTokenizer(hf.tokenizerFiles, {
    eosTokenIds: hf.generation.eosTokenIds,
  });
  return { folder, hf, tokenizer };
}

/**
 * Task 'jsonl': the dataset at taskOptions.path (relative to the config file's folder), a file or a
 * folder of shards in any format the importer reads (src/cli/_dataset.ts), mapped with
 * taskOptions.columns, as the task's JSONL text.
 */
export async function taskText(
  config: Config,
  configDir = process.cwd(),
): Promise<string | undefined> {
  if (config.task !== 'jsonl') return undefined;
  const path = String(config.taskOptions.path ?? '');
  if (!path) throw new Error("task 'jsonl' needs taskOptions.path (a dataset file or folder)");
  const file = resolve(configDir, path);
  let files;
  try {
    files = datasetFiles(file, 'taskOptions.path');
  } catch (e) {
    if (e instanceof RangeError) throw e;
    throw new Error(
      `${(e as Error).message}; a relative path is from the config file's folder, or the working folder without --config`,
      { cause: e },
    );
  }
  const columns = String(config.taskOptions.columns ?? '');
  return (await importOrExplain(files, 'taskOptions.path', columns, 'prompts')).text;
}

export async function loadTask(config: Config, configDir = process.cwd()): Promise<Task> {
  return createTask(config.task, config.taskOptions, { text: await taskText(config, configDir) });
}

/** Built-in and custom rewards (custom JS runs in QuickJS in a worker thread, with the configured time limit). */
export function rewardFunctions(config: Config, task: Task): RewardFunction[] {
  const custom = createCustomRewards(config.customRewards, {
    timeoutMs: config.rewardTimeoutMs,
    sandboxFactory: nodeSandboxFactory(),
  });
  return createRewardFunctions(config.rewards, task, customRewardResolver(custom), config);
}

/**
 * A trainer for `model` on `task`; the rewards score with `rewardTask` (the aha command scores with
 * the plain Countdown task while training on the preset's, whose options hold out its eval prompts).
 */
export function createTrainer(
  engine: Engine,
  config: Config,
  model: LoadedModel,
  task: Task,
  rewardTask: Task = task,
): GrpoTrainer {
  return new GrpoTrainer({
    engine,
    config,
    modelConfig: model.hf.config,
    weights: model.hf.tensors,
    tokenizer: model.tokenizer,
    task,
    rewardFunctions: rewardFunctions(config, rewardTask),
  });
}

// The engine openEngine() made last and the config loadModel() read last: whichever of the two
// comes second times the matmul variants for the model's products on that GPU (cached per adapter
// in this process; skipped on software adapters).
let openedEngine: Engine | null = null;
let loadedConfig: LoadedModel['hf']['config'] | null = null;

async function tuneMatmul(engine: Engine | null, config: LoadedModel['hf']['config'] | null) {
  if (!engine || !config) return;
  const sweep = await sweepMatmulForModel(engine, config);
  // Software adapters keep the emulation kernels silently (the GPU line already says so).
  if (sweep.skipped !== 'software adapter') console.log(describeMatmulChoice(sweep));
}

export async function openEngine(): Promise<Engine> {
  const engine = await createEngine();
  openedEngine = engine;
  await tuneMatmul(engine, loadedConfig);
  const a = engine.gpu.adapter;
  console.log(
    `GPU: ${a.vendor} ${a.architecture}${a.isSoftware ? ' (software emulation: CPU speed)' : ''}`,
  );
  return engine;
}
