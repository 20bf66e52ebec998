// Node side: the files the benchmark page fetches for one model, built in memory and served by the
// driver under /bench-models/<id>/ (nothing is written to disk, nothing comes from the network).
//   model.safetensors, config.json        → our engine (the page loads them as the app does)
//   plain.onnx                            → onnxruntime-web (exportOnnx, no cache inputs)
//   config.json, generation_config.json,
//   onnx/model.onnx (past_key_values)     → transformers.js (exportOnnxFolder, local files only)
// Both ONNX files hold the same f32 weights as model.safetensors.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { exportOnnx, exportOnnxFolder } from '../../src/export/onnx-export';
import { parseSafetensors, writeSafetensors } from '../../src/formats/safetensors';
import {
  parameterCount,
  parameterSpecs,
  parseHfConfig,
  type LlamaConfig,
} from '../../src/core/model-config';
import { initLlamaWeights } from '../../src/model/init';
import type { BenchModel } from './models';

export interface ModelFiles {
  config: LlamaConfig;
  parameters: number;
  /** URL path → bytes. */
  files: Map<string, Uint8Array>;
}

/** The model's config and weights: the bundled files, or seeded random weights. */
export function buildModelWeights(
  root: string,
  model: BenchModel,
): { config: LlamaConfig; tensors: Map<string, Float32Array> } {
  if (model.source.kind === 'bundled') {
    const dir = join(root, model.source.dir);
    const config = parseHfConfig(JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')));
    const parsed = parseSafetensors(
      new Uint8Array(readFileSync(join(dir, 'model.safetensors'))),
      'model.safetensors',
    );
    const tensors = new Map([...parsed.tensors].map(([name, t]) => [name, t.data]));
    return { config, tensors };
  }
  const config = parseHfConfig(model.source.config);
  return { config, tensors: initLlamaWeights(config, model.source.seed) };
}

export function buildModelFiles(root: string, model: BenchModel): ModelFiles {
  const { config, tensors } = buildModelWeights(root, model);
  const files = new Map<string, Uint8Array>();
  const at = (name: string) => `/bench-models/${model.id}/${name}`;
  // config.json, generation_config.json and onnx/model.onnx (with past_key_values).
  for (const [name, bytes] of exportOnnxFolder({ config, tensors })) files.set(at(name), bytes);
  files.set(at('plain.onnx'), exportOnnx({ config, tensors }));
  files.set(
    at('model.safetensors'),
    writeSafetensors(
      parameterSpecs(config).map((s) => ({
        name: s.name,
        shape: s.shape,
        data: tensors.get(s.name)!,
      })),
    ),
  );
  return { config, parameters: parameterCount(config), files };
}
