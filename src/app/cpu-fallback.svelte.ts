// Page state of the CPU fallback (no WebGPU): the bundled model loaded in the CPU worker
// (cpu-api.ts), the last sampled groups with their rewards, and a chat log. The task and its
// options come from the Train view's draft config, so the same task panel drives both.
import * as Comlink from 'comlink';
import type { CpuApi } from '../worker/cpu-api';
import type { CpuEvent, CpuModelInfo, CpuSampleResult } from '../worker/cpu-protocol';
import type { ChatReply } from '../worker/protocol';
import type { Session } from './session.svelte';

function msg(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).replace(/^Error: /, '');
}

export class CpuFallback {
  model: CpuModelInfo | null = $state.raw(null);
  progress: { phase: string; file: string; loaded: number; total: number | null } | null =
    $state.raw(null);
  busy: 'loading' | 'sampling' | 'chatting' | null = $state(null);
  error: string | null = $state(null);
  result: CpuSampleResult | null = $state.raw(null);
  chatLog: (ChatReply & { asked: string })[] = $state.raw([]);
  draw = $state(0);

  private listening = false;

  constructor(
    private readonly api: Comlink.Remote<CpuApi>,
    private readonly session: Session,
  ) {}

  private async run<T>(label: CpuFallback['busy'], fn: () => Promise<T>): Promise<T | null> {
    this.busy = label;
    this.error = null;
    try {
      return await fn();
    } catch (err) {
      this.error = msg(err);
      return null;
    } finally {
      this.busy = null;
    }
  }

  async load(): Promise<void> {
    if (!this.listening) {
      this.listening = true;
      await this.api.setListener(Comlink.proxy((e: CpuEvent) => (this.progress = e)));
    }
    const info = await this.run('loading', () => this.api.loadModel());
    this.progress = null;
    if (info) this.model = info;
  }

  async sample(opts: {
    prompts: number;
    samples: number;
    temperature: number;
    maxNewTokens: number;
    next?: boolean;
  }): Promise<void> {
    if (opts.next) this.draw += 1;
    const draw = this.draw;
    const out = await this.run('sampling', () =>
      this.api.sample({
        config: this.session.options.forWorker(),
        jsonlText: this.session.options.jsonl?.text,
        prompts: opts.prompts,
        samples: opts.samples,
        temperature: opts.temperature,
        maxNewTokens: opts.maxNewTokens,
        draw,
      }),
    );
    if (out) this.result = out;
  }

  async chat(
    text: string,
    opts: { temperature: number; maxNewTokens: number; useTemplate: boolean },
  ) {
    const template = this.session.options.draft.template ?? 'r1-zero';
    const enableThinking = this.session.options.draft.enableThinking ?? null;
    const reply = await this.run('chatting', () =>
      this.api.chat(text, { ...opts, template, enableThinking }),
    );
    if (reply) this.chatLog = [...this.chatLog, { ...reply, asked: text }];
    return reply;
  }
}
