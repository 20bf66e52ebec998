// The CPU fallback for browsers without WebGPU: the bundled model on the plain-TypeScript reference
// model (src/ref/llama.ts) through the CPU sampler (src/model/ref-sampler.ts), in its own worker
// (workers/cpu.worker.ts) so the page stays responsive. It samples completions for the current
// task's prompts and scores them with the built-in rule rewards, and answers chat messages.
// Nothing here trains: training needs WebGPU. Dependencies are injectable so Node tests drive it.
import { resolveConfig, type Config } from '../grpo/config';
import { reflectionMarkers, reflects, thinkText } from '../rewards/reflection';
import { createRewardFunctions, scoreCompletionSync } from '../rewards/rewards';
import { loadHfFolder, type LoadedHfModel } from '../formats/hf-folder';
import { urlSource, type ModelSource, type ReadProgress } from '../formats/model-source';
import { loadTokenizer, type Tokenizer } from '../formats/tokenizer';
import { parameterCount } from '../core/model-config';
import { RefSampler } from '../model/ref-sampler';
import { RefLlama } from '../ref/llama';
import { createTask, formatPrompt } from '../tasks/index';
import type { FormattedPrompt } from '../tasks/types';
import type { ChatOptions, ChatReply } from './protocol';
import { checkChatLength, sampleChatReply } from './chat';
import {
  CPU_MAX_NEW_TOKENS,
  CPU_MAX_PROMPTS,
  CPU_MAX_SAMPLES,
  CPU_REWARDS,
  type CpuEvent,
  type CpuGroup,
  type CpuModelInfo,
  type CpuSampleRequest,
  type CpuSampleResult,
} from './cpu-protocol';

export interface CpuApiOptions {
  /** URL of the bundled model folder (default /models/tiny-reasoner/ under the app's base). */
  bundledUrl?: string;
  /** Overrides where the model is read from (tests). */
  modelSource?: () => ModelSource;
}

const clampInt = (v: number, lo: number, hi: number) =>
  Math.min(hi, Math.max(lo, Math.floor(Number.isFinite(v) ? v : lo)));

/** The prompt the model sees: the task's R1-Zero text, or chat messages through the template
 * with the run's thinking switch (null: the template's default), as the GPU path's renderPrompt. */
export function renderCpuPrompt(
  formatted: FormattedPrompt,
  tokenizer: Pick<Tokenizer, 'encode' | 'hasChatTemplate' | 'applyChatTemplate' | 'encodeChat'>,
  enableThinking: boolean | null = null,
): { text: string; ids: number[] } {
  if (formatted.kind === 'text')
    return { text: formatted.text, ids: tokenizer.encode(formatted.text) };
  if (!tokenizer.hasChatTemplate)
    throw new Error("template 'chat' needs a tokenizer with a chat template; use 'r1-zero'");
  const chat = { addGenerationPrompt: true, enableThinking: enableThinking ?? undefined };
  return {
    text: tokenizer.applyChatTemplate(formatted.messages, chat),
    ids: tokenizer.encodeChat(formatted.messages, chat),
  };
}

/** Mean of each reward over the completions where it applied (NaN where none did). */
export function rewardMeans(groups: readonly CpuGroup[]): Record<string, number> {
  const out: Record<string, number> = {};
  const all = groups.flatMap((g) => g.completions);
  for (const name of [...CPU_REWARDS, 'total']) {
    const xs = all
      .map((c) => (name === 'total' ? c.total : c.rewards[name]))
      .filter((v): v is number => typeof v === 'number');
    out[name] = xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN;
  }
  return out;
}

/** The bundled model on the CPU: its folder, tokenizer and the reference sampler. */
interface CpuModel {
  hf: LoadedHfModel;
  tokenizer: Tokenizer;
  sampler: RefSampler;
  info: CpuModelInfo;
}

/** `prompts` problems of the configured task, `samples` completions each, with rewards. */
async function sampleOnCpu(m: CpuModel, request: CpuSampleRequest): Promise<CpuSampleResult> {
  const started = performance.now();
  const config = resolveConfig(request.config);
  const task = createTask(config.task, config.taskOptions, { text: request.jsonlText });
  const fns = createRewardFunctions([...CPU_REWARDS], task);
  const prompts = clampInt(request.prompts, 1, CPU_MAX_PROMPTS);
  const samples = clampInt(request.samples, 1, CPU_MAX_SAMPLES);
  const draw = clampInt(request.draw ?? 0, 0, 2 ** 20);
  const maxPositions = m.hf.config.maxPositions;
  // Problems of draw d are a prefix-stable slice of the task's stream for (seed, draw).
  const problems = task.generate(config.seed + 7919 * (draw + 1), prompts);
  const rendered = problems.map((p) =>
    renderCpuPrompt(task.formatPrompt(p, config.template), m.tokenizer, config.enableThinking),
  );
  const markers = reflectionMarkers(task.reflectionMarkers ?? []);
  const longest = Math.max(...rendered.map((r) => r.ids.length));
  if (longest >= maxPositions)
    throw new Error(
      `A prompt has ${longest} tokens; the model has only ${maxPositions} positions.`,
    );
  const maxNewTokens = clampInt(
    Math.min(
      request.maxNewTokens ?? config.maxCompletionLength,
      CPU_MAX_NEW_TOKENS,
      maxPositions - longest,
    ),
    1,
    CPU_MAX_NEW_TOKENS,
  );
  const temperature = request.temperature ?? config.temperature;
  const ids = rendered.flatMap((r) => Array.from({ length: samples }, () => r.ids));
  const out = await m.sampler.generate(ids, {
    maxNewTokens,
    temperature: Math.max(temperature, 1e-3),
    greedy: temperature === 0,
    topK: config.topK,
    topP: config.topP,
    minP: config.minP ?? 0,
    repetitionPenalty: config.repetitionPenalty ?? 1,
    seed: config.seed,
    stream: 1_000_000 + draw,
    eosTokenIds: m.tokenizer.eosTokenIds,
    padTokenId: m.tokenizer.padTokenId,
  });
  let tokens = 0;
  const groups: CpuGroup[] = problems.map((problem, i) => ({
    problem: { id: problem.id, question: problem.question, reference: problem.reference },
    prompt: rendered[i].text,
    completions: Array.from({ length: samples }, (_, j) => {
      const n = i * samples + j;
      const text = m.tokenizer.decode(out.completions[n], { skipSpecialTokens: true });
      tokens += out.completions[n].length;
      const scored = scoreCompletionSync(fns, null, {
        completion: text,
        prompt: rendered[i].text,
        problem,
      });
      return {
        text,
        tokens: out.completions[n].length,
        finished: out.finished[n],
        total: scored.total,
        rewards: scored.perFunction,
        reflects: reflects(thinkText(text), markers),
      };
    }),
  }));
  return {
    groups,
    means: rewardMeans(groups),
    elapsedMs: performance.now() - started,
    tokens,
  };
}

export function createCpuApi(options: CpuApiOptions = {}) {
  const bundledUrl =
    options.bundledUrl ??
    `${(import.meta.env?.BASE_URL as string | undefined) ?? '/'}models/tiny-reasoner/`;
  let listener: ((e: CpuEvent) => void) | null = null;
  let loading: Promise<CpuModelInfo> | null = null;
  let loaded: CpuModel | null = null;
  let busy = false;

  const emit = (e: CpuEvent) => {
    try {
      listener?.(e);
    } catch {
      // Events are best-effort.
    }
  };

  async function load(): Promise<CpuModelInfo> {
    const source = options.modelSource ? options.modelSource() : urlSource(bundledUrl);
    // The whole model in f32 on the host, not streamed: the CPU reference computes on these
    // arrays (a small model's path; the GPU worker streams instead, docs/guide/models.md).
    const hf = await loadHfFolder(source, {
      onProgress: (p: ReadProgress & { phase: string }) => emit({ type: 'load-progress', ...p }),
    });
    const tokenizer = await loadTokenizer(hf.tokenizerFiles, {
      eosTokenIds: hf.generation.eosTokenIds,
    });
    const sampler = new RefSampler(new RefLlama(hf.config, hf.tensors));
    const info: CpuModelInfo = {
      label: 'tiny-reasoner (bundled, CPU)',
      config: hf.config,
      parameterCount: parameterCount(hf.config),
      vocabSize: tokenizer.vocabSize,
    };
    loaded = { hf, tokenizer, sampler, info };
    return info;
  }

  function requireModel() {
    if (!loaded) throw new Error('Load the bundled model on the CPU first.');
    return loaded;
  }

  /** One request at a time: the CPU is the bottleneck and a second would only queue. */
  async function exclusive<T>(fn: () => Promise<T>): Promise<T> {
    if (busy) throw new Error('The CPU model is still busy with the previous request.');
    busy = true;
    try {
      return await fn();
    } finally {
      busy = false;
    }
  }

  return {
    setListener(callback: ((e: CpuEvent) => void) | null): void {
      listener = callback;
    },

    /** Reads the bundled model (cached by the browser after the first time) into the CPU model. */
    loadModel(): Promise<CpuModelInfo> {
      if (loaded) return Promise.resolve(loaded.info);
      loading ??= load().finally(() => (loading = null));
      return loading;
    },

    /** `prompts` problems of the configured task, `samples` completions each, with rewards. */
    sample(request: CpuSampleRequest): Promise<CpuSampleResult> {
      return exclusive(() => sampleOnCpu(requireModel(), request));
    },

    /** One reply from the CPU model (as the GPU chat box, on the bundled weights). */
    chat(
      text: string,
      opts: ChatOptions & {
        template?: Config['template'];
        enableThinking?: Config['enableThinking'];
      },
    ): Promise<ChatReply> {
      return exclusive(async () => {
        const m = requireModel();
        const maxPositions = m.hf.config.maxPositions;
        let prompt = text;
        let ids: number[];
        if (opts.useTemplate) {
          const template: Config['template'] = opts.template ?? 'r1-zero';
          const rendered = renderCpuPrompt(
            formatPrompt(
              {
                id: 'chat',
                task: 'chat',
                question: text,
                reference: null,
                verifier: { kind: 'none' },
              },
              template,
            ),
            m.tokenizer,
            opts.enableThinking ?? null,
          );
          prompt = rendered.text;
          ids = rendered.ids;
        } else {
          ids = m.tokenizer.encode(text);
        }
        checkChatLength(ids, maxPositions);
        const maxNew = clampInt(
          Math.min(opts.maxNewTokens, maxPositions - ids.length),
          1,
          CPU_MAX_NEW_TOKENS,
        );
        return sampleChatReply(m.sampler, m.tokenizer, prompt, ids, opts, maxNew);
      });
    },
  };
}

export type CpuApi = ReturnType<typeof createCpuApi>;
