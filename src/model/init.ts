// Seeded random initialisation of a Llama-family model, as transformers' _init_weights does:
// Linear and embedding weights ~ N(0, initializerRange²), biases 0, RMSNorm weights 1. Used for
// from-scratch models (tests, the learning check, benchmarks with random weights).
import { createRng } from '../core/rng';
import { numel, parameterSpecs, type LlamaConfig } from '../core/model-config';

export function initLlamaWeights(
  config: LlamaConfig,
  seed: number,
  initializerRange = 0.02,
): Map<string, Float32Array> {
  const rng = createRng(seed);
  // Box–Muller on the seeded uniform stream: the same seed gives the same weights everywhere.
  const normal = () => {
    const u = Math.max(rng.next(), 1e-12);
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rng.next());
  };
  const weights = new Map<string, Float32Array>();
  for (const spec of parameterSpecs(config)) {
    const data = new Float32Array(numel(spec.shape));
    if (spec.name.endsWith('norm.weight')) data.fill(1);
    else if (!spec.name.endsWith('.bias'))
      for (let i = 0; i < data.length; i++) data[i] = normal() * initializerRange;
    weights.set(spec.name, data);
  }
  return weights;
}
