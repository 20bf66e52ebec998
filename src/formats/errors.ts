// Typed errors of model file I/O: each names the file (and the tensor, where one is involved) so a
// user who brought their own model folder can see which file is wrong and why.

/** A model file (safetensors, index, config, tokenizer) that cannot be read or does not fit the model. */
export class ModelFileError extends Error {
  override name = 'ModelFileError';
  constructor(
    /** The file the problem is in, as the user named it (e.g. 'model-00001-of-00002.safetensors'). */
    readonly file: string,
    /** What is wrong, one sentence without the file name. */
    readonly detail: string,
    /** The tensor involved, when there is one. */
    readonly tensor?: string,
  ) {
    super(`${file}${tensor === undefined ? '' : ` (tensor '${tensor}')`}: ${detail}`);
  }
}

/**
 * Why a source could not deliver a file: absent ('missing', which loaders may tolerate for optional
 * files), unreachable ('network'), an HTTP error ('http'), a web page instead of the file ('html'),
 * a local read failure ('io'), a name or file the source will not read because it lies outside the
 * model folder / base URL or is not a regular file ('refused'), or a file larger than the loader
 * allows for it ('too-large').
 */
export type ModelSourceFailure =
  'missing' | 'network' | 'http' | 'html' | 'io' | 'refused' | 'too-large';

/** A model source (folder, files, URL) that could not deliver a file at all. */
export class ModelSourceError extends Error {
  override name = 'ModelSourceError';
  constructor(
    /** The file or URL that could not be read. */
    readonly file: string,
    readonly detail: string,
    readonly reason: ModelSourceFailure,
  ) {
    super(`${file}: ${detail}`);
  }
}
