// How the LM head's rows are cut into chunks so that no (all completion tokens × V) logits or
// dLogits tensor exists: training computes the logits of `rows` head rows at a time, gathers their
// log-probs, and in backward recomputes them and writes their gradient in place of the whole
// batch's. One formula for the bytes a chunk takes, shared by the model and the memory plan.
//
// Legend: V vocab, k rows per chunk.

const F32 = 4;

/** The default of Config.logitsMemoryMiB, in bytes: what the logits chunk and its gradient share. */
export const DEFAULT_LOGITS_MEMORY_BYTES = 256 * 2 ** 20;

/** One chunk of head rows: rows [start, start + rows) of the (N·count) head rows. */
export interface RowChunk {
  start: number;
  rows: number;
}

/** Bytes the head's chunk buffers take for `rows` rows: the logits (k, V) and dLogits (k, V), f32. */
export function headChunkBytes(rows: number, vocabSize: number): number {
  return 2 * rows * vocabSize * F32;
}

/**
 * Rows per head chunk for a budget of `budgetBytes` (headChunkBytes of the chunk ≤ budget):
 * max(1, floor(budget / headChunkBytes(1, V))), rounded down to a multiple of 4 when at least 4
 * fit (the matmuls' vec4 variant needs row counts that are), at most `totalRows`, and small enough
 * that one (k, V) buffer fits `maxBindingBytes` (one storage binding).
 */
export function headChunkRows(
  budgetBytes: number,
  vocabSize: number,
  totalRows: number,
  maxBindingBytes = Infinity,
): number {
  const byBudget = Math.floor(budgetBytes / headChunkBytes(1, vocabSize));
  const byBinding = Math.floor(maxBindingBytes / (vocabSize * F32));
  let rows = Math.max(1, Math.min(byBudget, byBinding));
  if (rows >= 4) rows -= rows % 4;
  return Math.max(1, Math.min(rows, totalRows));
}

/** The chunks of `chunkRows` rows (the last one shorter) that cover `totalRows` rows in order. */
export function headChunks(totalRows: number, chunkRows: number): RowChunk[] {
  if (!(chunkRows >= 1)) throw new RangeError(`head chunks need ≥ 1 row each, got ${chunkRows}`);
  const chunks: RowChunk[] = [];
  for (let start = 0; start < totalRows; start += chunkRows)
    chunks.push({ start, rows: Math.min(chunkRows, totalRows - start) });
  return chunks;
}
