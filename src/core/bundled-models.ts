// The models shipped with the app, each a Hugging Face folder under public/models/<name>/ made by
// tools/pretrain (same corpus and tokenizer): the tiny reasoner, the default everywhere a model is
// not named, and the tiny student, about a third of its size, to distil the reasoner into
// (docs/guide/models.md). The page asks for one as { kind: 'bundled', name }, the command line as
// `--model <name>` ('bundled' is the default one); both run on the same files, precached offline.

export const BUNDLED_MODELS = ['tiny-reasoner', 'tiny-student'] as const;
export type BundledName = (typeof BUNDLED_MODELS)[number];

/** The bundled model used when none is named ({ kind: 'bundled' }, `--model bundled`). */
export const DEFAULT_BUNDLED: BundledName = 'tiny-reasoner';

export function isBundledName(name: string): name is BundledName {
  return (BUNDLED_MODELS as readonly string[]).includes(name);
}

/** What a loaded bundled model is called on the page, in run names and checkpoints. */
export function bundledLabel(name: BundledName = DEFAULT_BUNDLED): string {
  return `${name} (bundled)`;
}

/** The model's folder relative to the app's base URL and to public/ ('models/tiny-student/'). */
export function bundledPath(name: BundledName = DEFAULT_BUNDLED): string {
  return `models/${name}/`;
}
