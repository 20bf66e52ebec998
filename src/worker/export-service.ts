// The trainer worker's export service: the current weights as a Hugging Face folder or an ONNX
// file (a LoRA run's adapters merged in), or a LoRA run's adapter as a PEFT folder.
import { exportDtypeOf, exportHfFolder } from '../export/hf-export';
import { exportOnnx } from '../export/onnx-export';
import { exportPeftAdapter, type LoraWeights } from '../export/peft-adapter';
import type { WorkerContext } from './context';
import type { ExportedFile } from './protocol';

export function exportService(ctx: WorkerContext) {
  return {
    /**
     * 'hf': config, safetensors, tokenizer and generation config; 'onnx': one model.onnx; 'peft':
     * adapter_config.json and adapter_model.safetensors (LoRA runs only).
     */
    async exportModel(format: 'hf' | 'onnx' | 'peft'): Promise<ExportedFile[]> {
      const r = ctx.requireRun().run;
      const m = ctx.requireModel();
      const policy = r.trainer.policy;
      const tensors = await policy.readParameters();
      const lora: LoraWeights | null = policy.lora
        ? { options: policy.lora, adapters: await policy.readAdapters() }
        : null;
      const asList = (files: Map<string, Uint8Array>) =>
        [...files].map(([name, bytes]) => ({ name, bytes }));
      if (format === 'peft') {
        if (!lora) throw new Error('This run trains every weight (usePeft is off): no adapter.');
        return asList(
          exportPeftAdapter({ config: m.hf.config, lora, baseModelNameOrPath: m.label }),
        );
      }
      if (format === 'onnx') {
        return [{ name: 'model.onnx', bytes: exportOnnx({ config: m.hf.config, tensors, lora }) }];
      }
      return asList(
        exportHfFolder({
          config: m.hf.config,
          tensors,
          lora,
          tokenizerFiles: m.hf.tokenizerFiles,
          generation: m.hf.generation,
          // An NF4 base exports its merged weights as bf16 (F32 otherwise: exact).
          dtype: exportDtypeOf(policy.parameters.dtypes.values()),
        }),
      );
    },
  };
}
