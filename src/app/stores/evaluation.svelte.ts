// The page's stores of the evaluation service (chat, the before/after comparison:
// src/worker/evaluation-service.ts) and of the export service (HF folder, ONNX, PEFT adapter:
// src/worker/export-service.ts). Both only ask the worker and show its failures as banners.
import type { ChatOptions, ChatReply, Comparison, ExportedFile } from '../../worker/protocol';
import type { Shell } from './shell';

export class EvaluationStore {
  private readonly shell: Shell;

  constructor(shell: Shell) {
    this.shell = shell;
  }

  chat(text: string, options: ChatOptions): Promise<ChatReply | null> {
    return this.shell.task(
      'Generating',
      () => this.shell.api.chat(text, options),
      'The model did not answer',
    );
  }

  /** Base vs current weights on the first `prompts` held-out prompts (default COMPARE_PROMPTS). */
  compare(prompts?: number): Promise<Comparison | null> {
    return this.shell.task(
      'Comparing',
      () => this.shell.api.compare(prompts),
      'The comparison failed',
    );
  }
}

export class ExportStore {
  private readonly shell: Shell;

  constructor(shell: Shell) {
    this.shell = shell;
  }

  model(format: 'hf' | 'onnx' | 'peft'): Promise<ExportedFile[] | null> {
    return this.shell.task(
      'Exporting the model',
      () => this.shell.api.exportModel(format),
      'Not exported',
    );
  }
}
