// The trainer worker's model service: the GPU adapter, the model's config and memory plan before
// any weight is read (preview, plan, a timed step estimate), loading weights and tokenizer, and a
// PEFT adapter loaded onto the base. A load or an adapter starts a new run (run-service's kind).
import { WebGpuUnavailableError } from '../engine/errors';
import { readerIdentity } from '../train/checkpoint';
import { resolveConfig, type ConfigInput } from '../grpo/config';
import { estimateStep, type DeviceTiming, type StepEstimate } from '../grpo/step-estimate';
import { CONFIG_FILE, openHfFolder } from '../formats/hf-folder';
import { parseQuantizationConfig } from '../formats/bnb-4bit';
import { parseJsonFile, type ReadProgress } from '../formats/model-source';
import { loadTokenizer } from '../formats/tokenizer';
import {
  loraConfigFields,
  parsePeftAdapter,
  PEFT_CONFIG_FILE,
  PEFT_WEIGHTS_FILE,
} from '../export/peft-adapter';
import { parameterCount, parseHfConfig, type LlamaConfig } from '../core/model-config';
import { bundledLabel } from '../core/bundled-models';
import { describeMatmulChoice, sweepMatmulForModel } from '../kernels/matmul-sweep';
import { message, modelInfo, type AdapterProbe, type WorkerContext } from './context';
import { timeDevice } from './warmup';
import type {
  ModelChoice,
  ModelInfo,
  ModelPreview,
  PlanSummary,
  RunState,
  TrainerStatus,
} from './protocol';

/** Whether config.json declares a bitsandbytes 4-bit checkpoint (its projections stay NF4). Another
 * quantisation is refused by name when the model loads (openHfFolder), not in the preview. */
function isPrequantisedConfig(json: unknown): boolean {
  if (typeof json !== 'object' || json === null) return false;
  try {
    return parseQuantizationConfig(json as Record<string, unknown>, CONFIG_FILE) !== null;
  } catch {
    return false;
  }
}

export function modelService(ctx: WorkerContext) {
  return {
    /** Acquires (once) the worker's GPU device and describes the adapter. */
    async probeAdapter(): Promise<AdapterProbe> {
      if (ctx.engineError) return { ok: false, ...ctx.engineError };
      try {
        return { ok: true, adapter: (await ctx.getEngine()).gpu.adapter };
      } catch (err) {
        ctx.engineError =
          err instanceof WebGpuUnavailableError
            ? { reason: err.message.replace(err.remedy, '').trim(), remedy: err.remedy }
            : {
                reason: message(err),
                remedy: 'Reload the page; if it persists, restart the browser.',
              };
        return { ok: false, ...ctx.engineError };
      }
    },

    status(): { status: TrainerStatus; step: number; model: ModelInfo | null } {
      return {
        status: ctx.status,
        step: ctx.run?.run.stepCount ?? 0,
        model: ctx.model ? modelInfo(ctx.model) : null,
      };
    },

    /** Reads only config.json and plans memory for `config`: shown before any weight is read. */
    async previewModel(choice: ModelChoice, config: Partial<ConfigInput>): Promise<ModelPreview> {
      const source = ctx.sourceFor(choice);
      const json = parseJsonFile(await source.read(CONFIG_FILE), CONFIG_FILE);
      const llama = parseHfConfig(json, CONFIG_FILE);
      const prequantised = isPrequantisedConfig(json);
      return {
        label: choice.kind === 'bundled' ? bundledLabel(choice.name) : source.label,
        config: llama,
        parameterCount: parameterCount(llama),
        prequantised,
        plan: await ctx.planFor(
          llama,
          resolveConfig(config),
          prequantised ? 'prequantised' : undefined,
        ),
      };
    },

    /**
     * How long one step of `config` on the model of `choice` takes on this device, before any
     * weight is read: a random model of its config decodes the step's B·G sequences and its
     * matrix products run on a block of rows, timed on the GPU (warmup.ts), scaled to a step
     * (grpo/step-estimate.ts). Shown by the first-run screen before its first click.
     */
    async estimateStep(
      choice: ModelChoice,
      config: Partial<ConfigInput>,
    ): Promise<{ timing: DeviceTiming; estimate: StepEstimate }> {
      const resolved = resolveConfig(config);
      const json = parseJsonFile(await ctx.sourceFor(choice).read(CONFIG_FILE), CONFIG_FILE);
      const llama = parseHfConfig(json, CONFIG_FILE);
      ctx.requireIdle('Pause training to time the device.');
      const timing = await timeDevice(await ctx.getEngine(), llama, {
        rows: resolved.perStepPrompts * resolved.numGenerations,
        // The playground's prompts fill most of maxPromptLength; a step pads them to the longest.
        promptTokens: resolved.maxPromptLength,
        temperature: resolved.temperature,
        topK: resolved.topK,
        topP: resolved.topP,
      });
      return { timing, estimate: estimateStep(timing, resolved) };
    },

    /** The memory plan of `config` on a model of `llama` (a previewed config.json): the page
     * re-plans with it as the options change, before any weight is read. */
    async planMemory(
      llama: LlamaConfig,
      config: Partial<ConfigInput>,
      /** config.json's quantization_config is bitsandbytes 4-bit (ModelPreview.prequantised). */
      prequantised = false,
    ): Promise<PlanSummary> {
      return ctx.planFor(llama, resolveConfig(config), prequantised ? 'prequantised' : undefined);
    },

    /** Loads weights and tokenizer (progress events), then builds a run with `config`. */
    async loadModel(
      choice: ModelChoice,
      config: Partial<ConfigInput>,
      jsonlText?: string,
    ): Promise<{ model: ModelInfo; run: RunState }> {
      ctx.requireIdle('Pause training before loading another model.');
      const resolved = resolveConfig(config);
      const source = ctx.sourceFor(choice);
      const previous = ctx.status;
      ctx.setStatus('loading');
      try {
        const label = choice.kind === 'bundled' ? bundledLabel(choice.name) : source.label;
        const hf = await openHfFolder(source, {
          onProgress: (p: ReadProgress & { phase: string }) =>
            ctx.emit({ type: 'load-progress', ...p }),
        });
        let identity;
        let tokenizer;
        try {
          // Reads every tensor once (checked: finite values) before the current model is let go.
          identity = await readerIdentity(label, hf.weights);
          const plan = await ctx.planFor(hf.config, resolved, hf.weights);
          if (!plan.fits) throw new Error(`The model does not fit: ${plan.message}`);
          tokenizer = await loadTokenizer(hf.tokenizerFiles, {
            eosTokenIds: hf.generation.eosTokenIds,
          });
        } catch (err) {
          await hf.weights.close();
          throw err;
        }
        // Matmul variants timed on this GPU for this model's products (cached per adapter)
        // before the model's pipelines are prepared; skipped on software adapters.
        const sweep = await sweepMatmulForModel(await ctx.getEngine(), hf.config);
        ctx.disposeRun();
        await ctx.model?.hf.weights.close();
        ctx.model = {
          label,
          hf,
          tokenizer,
          identity,
          matmul: describeMatmulChoice(sweep),
        };
        ctx.lost = false;
        const state = ctx.adopt(await ctx.buildRun(resolved, jsonlText, ctx.newRunIds(resolved)));
        ctx.setStatus('ready');
        return { model: modelInfo(ctx.model), run: state };
      } catch (err) {
        ctx.setStatus(ctx.model ? (previous === 'loading' ? 'ready' : previous) : 'no-model');
        throw err;
      }
    },

    /**
     * Loads a PEFT LoRA adapter (adapter_config.json + adapter_model.safetensors) onto the loaded
     * base model: checked against it, then a new run (step 0) with the adapter's LoRA settings
     * and the run's other options starts from the adapter's weights.
     */
    async importAdapter(
      files: readonly { name: string; bytes: Uint8Array }[],
      jsonlText?: string,
    ): Promise<RunState> {
      ctx.requireIdle('Pause training before loading an adapter.');
      const model = ctx.requireModel('Load the adapter’s base model first.');
      const named = (file: string) => {
        const hit = files.find((f) => f.name.split('/').pop() === file);
        if (!hit)
          throw new Error(
            `${file} is missing: choose both ${PEFT_CONFIG_FILE} and ${PEFT_WEIGHTS_FILE}.`,
          );
        return hit.bytes;
      };
      const adapter = parsePeftAdapter(
        { config: named(PEFT_CONFIG_FILE), weights: named(PEFT_WEIGHTS_FILE) },
        model.hf.config,
      );
      const base = ctx.run?.run.config ?? resolveConfig({});
      const config = resolveConfig({ ...base, ...loraConfigFields(adapter.options) });
      const r = await ctx.buildRun(config, jsonlText, ctx.newRunIds(config));
      r.run.trainer.setAdapters(adapter.options, adapter.adapters);
      ctx.lost = false;
      const state = ctx.adopt(r);
      ctx.setStatus('ready');
      return state;
    },
  };
}
