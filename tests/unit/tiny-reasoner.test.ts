// The bundled tiny reasoner (public/models/tiny-reasoner): the checks every bundled model passes
// (tests/support/bundled-model.ts: config, size, tokenizer, greedy decoding as PyTorch did, and the
// base rates of the model card re-scored from the pretraining script's samples with the project's
// reward code) with this model's documented shape.
import { describeBundledModel } from '../support/bundled-model';

describeBundledModel({
  name: 'tiny-reasoner',
  pretrainDir: 'tools/pretrain',
  hiddenSize: 80,
  intermediateSize: 224,
  numHeads: 5,
  headDim: 16,
  parameters: 354_080,
  maxBytes: 20 * 1024 * 1024,
});
