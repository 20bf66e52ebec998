// The second bundled model, the tiny student (public/models/tiny-student, issue #38): the checks every
// bundled model passes (tests/support/bundled-model.ts: config, size, tokenizer, greedy decoding
// exactly as PyTorch did in tools/pretrain/pretrain.py, and the base rates of its run.json and model
// card re-scored from the script's samples with the project's reward code), and what makes it the
// student: a third of the tiny reasoner's size or less, with the reasoner's own tokenizer files.
import { expect, it } from 'vitest';
import { loadHfFolder } from '../../src/formats/hf-folder';
import { folderSource } from '../../src/formats/model-source';
import { parameterCount } from '../../src/core/model-config';
import { describeBundledModel } from '../support/bundled-model';

describeBundledModel({
  name: 'tiny-student',
  pretrainDir: 'tools/pretrain/student',
  hiddenSize: 48,
  intermediateSize: 96,
  numHeads: 4,
  headDim: 12,
  parameters: 114_144,
  maxBytes: 1024 * 1024,
  extra: (model) => {
    it('is a third of the reasoner’s size or less, with the reasoner’s tokenizer files', async () => {
      const loaded = model();
      const teacher = await loadHfFolder(folderSource('public/models/tiny-reasoner'));
      expect(parameterCount(loaded.config)).toBeLessThanOrEqual(parameterCount(teacher.config) / 3);
      for (const name of ['tokenizer.json', 'tokenizer_config.json'])
        expect(loaded.tokenizerFiles.get(name)).toEqual(teacher.tokenizerFiles.get(name));
    });
  },
});
