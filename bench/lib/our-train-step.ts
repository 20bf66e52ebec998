// Our engine's side of the side-by-side training-step benchmark, shared by the browser benchmark
// (bench/browser/model-bench.ts) and the Node profile (bench/node/profile.ts): forward, mean
// next-token cross-entropy over all N·T tokens, backward, then Adam (β = 0.9, 0.999, ε = 1e-8,
// no weight decay, no clipping) on every weight, as GrpoTrainer runs its optimizer (GpuAdamW).
import { createStorageBuffer, readF32, writeBuffer } from '../../src/engine/buffers';
import type { Engine } from '../../src/engine/engine';
import { CrossEntropyKernel, crossEntropyRowWeights } from '../../src/kernels/cross-entropy';
import type { LlamaConfig } from '../../src/core/model-config';
import { GpuLlama } from '../../src/model/llama';
import { GpuAdamW } from '../../src/optim/adamw';

export interface OurTrainStep {
  /** One step, its work submitted through `engine` (the profiler's wrapper, say); returns the
   * loss before the update. */
  step(engine?: Engine): Promise<number>;
  dispose(): void;
}

export function ourTrainStep(
  engine: Engine,
  model: { config: LlamaConfig; tensors: Map<string, Float32Array> },
  inputs: Uint32Array,
  targets: Uint32Array,
  w: { N: number; T: number; learningRate: number },
): OurTrainStep {
  const { device } = engine;
  const { N, T } = w;
  const R = N * T;
  const V = model.config.vocabSize;
  const llama = GpuLlama.load(engine, model.config, model.tensors);
  const optimizer = new GpuAdamW(engine, llama, {
    beta1: 0.9,
    beta2: 0.999,
    eps: 1e-8,
    weightDecay: 0,
    maxGradNorm: 0,
  });
  const crossEntropy = new CrossEntropyKernel(device, engine.pipelines);
  const buffers = {
    targets: createStorageBuffer(device, R * 4, 'bench.targets'),
    rowWeights: createStorageBuffer(device, R * 4, 'bench.rowWeights'),
    loss: createStorageBuffer(device, 4, 'bench.loss'),
    dLogits: createStorageBuffer(device, R * V * 4, 'bench.dLogits'),
    logp: createStorageBuffer(device, R * 4, 'bench.logp'),
    entropy: createStorageBuffer(device, R * 4, 'bench.entropy'),
    lse: createStorageBuffer(device, R * 4, 'bench.lse'),
  };
  const keyStart = new Uint32Array(N);
  const positions = new Uint32Array(R).map((_, i) => i % T);
  const rowWeights = crossEntropyRowWeights(new Float32Array(R).fill(1));
  return {
    async step(runner = engine) {
      // What the trainer uploads per step: the batch, the targets and the row weights.
      const batch = llama.uploadBatch(inputs, keyStart, positions, N, T);
      writeBuffer(device, buffers.targets, targets);
      writeBuffer(device, buffers.rowWeights, rowWeights);
      await llama.ready; // pipelines compiled, so the timed encode never compiles
      await runner.run(async (enc) => {
        llama.zeroGradients(enc);
        const state = llama.forward(enc, batch, { start: 0, count: T });
        crossEntropy.encode(enc, { ...buffers, logits: state.logits, R, V });
        llama.backward(enc, state, buffers.dLogits);
        optimizer.encodeStep(enc, w.learningRate);
      }, 'bench.train');
      const stats = await optimizer.readStats();
      if (!stats.finite) throw new Error(`non-finite gradient norm ${stats.norm}`);
      optimizer.commitStep();
      return (await readF32(device, buffers.loss, 1))[0];
    },
    dispose() {
      for (const b of Object.values(buffers)) b.destroy();
      optimizer.destroy();
      llama.destroy();
    },
  };
}
