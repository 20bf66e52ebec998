// Teacher-forced log-probs of given completions under a policy: the GRPO update's scoring path
// (policy forward at the completion rows → logprob_gather, as policy-objective.ts scoreMicro
// encodes it) without loss, backward or optimizer, so nothing about the run changes. The e2e test
// of a LoRA adapter's export and re-import compares these numbers (the page's ?test-hooks=1).
//
// Legend: N sequences, T = P + L columns, P prompt width, L completion width, V vocab.
import { readF32, writeBuffer } from '../engine/buffers';
import type { Engine } from '../engine/engine';
import { Workspace } from '../engine/workspace';
import { LogprobGatherKernel } from '../kernels/logprob';
import { packBatch } from '../model/batch';
import type { GpuLlama } from '../model/llama';

const F32 = 4;

/**
 * log π(completion[n][j] | prompt[n], completion[n][<j]) for every completion token, each row as
 * long as its completion. Logits are divided by `temperature` first, as the update does (TRL).
 */
export async function scoreCompletions(
  engine: Engine,
  policy: GpuLlama,
  prompts: readonly (readonly number[])[],
  completions: readonly (readonly number[])[],
  options: { padId: number; temperature?: number },
): Promise<Float32Array[]> {
  const batch = packBatch(prompts, completions, { padId: options.padId });
  const { N, T, P, L } = batch;
  const V = policy.config.vocabSize;
  if (batch.tokens.some((t) => t >= V))
    throw new RangeError(`scoreCompletions: a token id is outside the vocabulary (V = ${V})`);
  const gather = new LogprobGatherKernel(engine.device, engine.pipelines);
  await Promise.all([policy.ready, gather.prepare(V)]);
  const ws = new Workspace(engine.device);
  try {
    const R = N * L;
    const targets = ws.get('score.targets', R * 4); // (N, L) u32
    const logp = ws.get('score.logp', R * F32); // (N, L)
    const entropy = ws.get('score.entropy', R * F32); // (N, L), unused here
    const lse = ws.get('score.lse', R * F32); // (N, L), unused here
    writeBuffer(engine.device, targets, batch.targets);
    await engine.run((enc) => {
      const upload = policy.uploadBatch(batch.tokens, batch.keyStart, batch.positions, N, T);
      // The logits at columns P−1 … P+L−2 predict the completion tokens.
      const state = policy.forward(enc, upload, { start: P - 1, count: L });
      gather.encode(enc, {
        logits: state.logits,
        targets,
        logp,
        entropy,
        lse,
        R,
        V,
        invTemperature: 1 / (options.temperature ?? 1),
      });
    }, 'score-completions');
    const all = await readF32(engine.device, logp, R);
    return completions.map((c, n) => all.slice(n * L, n * L + c.length));
  } finally {
    ws.destroy();
  }
}
