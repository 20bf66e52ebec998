// GpuLlama.loadStreamed (issue #37, bounded host memory): a tiny BF16 model folder on disk read
// tensor by tensor from a WeightReader into the GPU buffers holds the same parameters as the
// whole-model load (GpuLlama.load of loadHfFolder's Map): a full fine-tune in f32 and a LoRA run
// with the base stored bf16 as shipped. The identity hashed on the way equals weightsIdentity of
// the Map, and the loader's live host bytes stay within the largest tensor plus a fixed margin
// while the upload runs (the counting source of tests/support/counting-source.ts).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseHfConfig, type LlamaConfig } from '../../src/core/model-config';
import { loadHfFolder, openHfFolder } from '../../src/formats/hf-folder';
import { folderSource } from '../../src/formats/model-source';
import { widenWeight, writeSafetensors } from '../../src/formats/safetensors';
import { GpuLlama } from '../../src/model/llama';
import { weightsIdentity, weightsIdentityHasher } from '../../src/train/checkpoint';
import { counting } from '../support/counting-source';
import { lcgWeights, tinyLlamaConfigJson } from '../support/llama-fixture';
import { testEngine } from './harness';

const MARGIN_BYTES = 64 * 1024;

const configJson = tinyLlamaConfigJson({ hidden: 16, intermediate: 32, vocab: 512 });

const dir = mkdtempSync(join(tmpdir(), 'streamed-gpu-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function writeFolder(): LlamaConfig {
  writeFileSync(join(dir, 'config.json'), JSON.stringify(configJson));
  const c = parseHfConfig(configJson);
  const tensors = lcgWeights(c, 3, 256);
  writeFileSync(
    join(dir, 'model.safetensors'),
    writeSafetensors(tensors, undefined, { dtype: 'BF16' }),
  );
  return c;
}

describe('GpuLlama.loadStreamed', () => {
  it('uploads tensor by tensor what load uploads, in bounded host memory', async () => {
    const engine = await testEngine();
    const config = writeFolder();
    const whole = await loadHfFolder(folderSource(dir), { requireTokenizer: false });
    const lora = {
      r: 2,
      alpha: 4,
      targetModules: 'all-linear' as const,
      useRslora: false,
      dropout: 0,
    };
    for (const options of [{}, { lora, frozenDtype: 'bf16' as const }]) {
      const reference = GpuLlama.load(engine, config, whole.tensors, options);
      const meter = counting(folderSource(dir));
      const { weights } = await openHfFolder(meter.source, { requireTokenizer: false });
      meter.releaseAll();
      const hasher = weightsIdentityHasher('m');
      const model = await GpuLlama.loadStreamed(engine, config, weights, options, (name, data) => {
        hasher.add(name, widenWeight(data as Parameters<typeof widenWeight>[0]));
        meter.release(
          data instanceof Float32Array ? data.buffer : (data as { bits: Uint16Array }).bits.buffer,
        );
      });
      await weights.close();
      expect(await model.readParameters()).toEqual(await reference.readParameters());
      expect(hasher.finish()).toEqual(await weightsIdentity('m', whole.tensors));
      expect(meter.peak).toBeLessThanOrEqual(weights.largestTensorBytes + MARGIN_BYTES);
      expect(model.parameters.parameterBytes).toBe(reference.parameters.parameterBytes);
      model.destroy();
      reference.destroy();
    }
  });
});
