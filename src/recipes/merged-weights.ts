// A LoRA recipe stage's end weights, read one tensor at a time: the weights the stage started from,
// as it stored its frozen base (16-bit rounded, NF4 quantised and dequantised), with its adapters
// merged in (W + s·B·A). They are what the stage trained, as one model, and what the next stage
// starts from, yet only the adapters are held: the next stage, an export or an evaluation reads
// each tensor as it needs it, so a stage on a 3–4B 4-bit base never makes a whole-model f32 copy
// on the host. A recipe resumed after such a stage rebuilds the same reader from the adapters its
// checkpoint holds (src/recipes/recipe.ts), so both give the same values by construction.
import { parameterSpecs, type LlamaConfig } from '../core/model-config';
import { loraMergeTargets, mergeLoraProjection, type LoraOptions } from '../core/lora';
import type { WeightDtype } from '../kernels/matmul';
import {
  isStreamed,
  storedValue,
  type Nf4Options,
  type StreamedWeights,
  type WeightSource,
} from '../model/parameters';

/**
 * The end weights of a LoRA stage that started from `start` and stored its base as `frozen`
 * (with `nf4`'s options), with `adapters` (trained with `lora`) merged in, as a reader. Every
 * tensor reads as F32; a read returns a buffer of its own.
 */
export function mergedLoraWeights(
  config: LlamaConfig,
  start: WeightSource,
  frozen: WeightDtype,
  nf4: Nf4Options,
  lora: LoraOptions,
  adapters: ReadonlyMap<string, Float32Array>,
): StreamedWeights {
  const specs = new Map(parameterSpecs(config).map((spec) => [spec.name, spec]));
  const targets = loraMergeTargets(config, lora);
  return {
    storedDtypes: new Map([...specs.keys()].map((name) => [name, 'F32'])),
    async read(name) {
      const spec = specs.get(name);
      if (!spec) throw new Error(`mergedLoraWeights: no parameter ${name}`);
      const streamed = isStreamed(start);
      const data = streamed ? await start.read(name) : start.get(name);
      if (!data) throw new Error(`mergedLoraWeights: missing parameter ${name}`);
      const values = storedValue(spec, data, frozen, nf4);
      const target = targets.get(name);
      if (target) return mergeLoraProjection(name, values, target, lora, adapters);
      // A Map's own array is never handed out (a reader's reads are the caller's to keep).
      return !streamed && values === data ? values.slice() : values;
    },
  };
}
