// Typed errors of the GPU engine: each says what failed and what the user can do about it.

/** WebGPU is not available in this environment (no navigator.gpu, no adapter, no Node driver). */
export class WebGpuUnavailableError extends Error {
  override name = 'WebGpuUnavailableError';
  constructor(
    message: string,
    /** What the user can do about it, one sentence. */
    readonly remedy: string,
  ) {
    super(`${message} ${remedy}`);
  }
}

/** A WGSL module failed to compile; carries the first error's position and the source line. */
export class WgslCompileError extends Error {
  override name = 'WgslCompileError';
  constructor(
    readonly label: string,
    readonly line: number,
    readonly column: number,
    readonly detail: string,
    readonly sourceLine: string,
    readonly allMessages: string,
  ) {
    super(
      `WGSL compile error in ${label} at ${line}:${column}: ${detail}\n` +
        `  ${line} | ${sourceLine}\n` +
        `  ${' '.repeat(String(line).length)} | ${' '.repeat(Math.max(0, column - 1))}^\n` +
        allMessages,
    );
  }
}

/** Pipeline creation or a dispatch raised a WebGPU validation error. */
export class GpuValidationError extends Error {
  override name = 'GpuValidationError';
}
