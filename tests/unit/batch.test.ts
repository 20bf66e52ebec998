// packBatch: left padding, positions, targets and masks on a hand-worked batch.
import { describe, expect, it } from 'vitest';
import { packBatch } from '../../src/model/batch';

describe('packBatch', () => {
  it('left-pads prompts so completions share a start column', () => {
    const batch = packBatch([[5, 6, 7], [8]], [[1, 2], [3]], { padId: 0 });
    expect(batch).toMatchObject({ N: 2, P: 3, L: 2, T: 5 });
    expect(Array.from(batch.tokens)).toEqual([5, 6, 7, 1, 2, 0, 0, 8, 3, 0]);
    expect(Array.from(batch.keyStart)).toEqual([0, 2]);
    expect(Array.from(batch.positions)).toEqual([0, 1, 2, 3, 4, 0, 0, 0, 1, 2]);
    expect(Array.from(batch.targets)).toEqual([1, 2, 3, 0]);
    expect(Array.from(batch.mask)).toEqual([1, 1, 1, 0]);
  });

  it('masks out whole completions on request and honours a fixed width', () => {
    const batch = packBatch([[4], [4]], [[9, 9], [7]], {
      padId: 2,
      completionWidth: 3,
      maskedOut: [true, false],
    });
    expect(batch.T).toBe(4);
    expect(Array.from(batch.mask)).toEqual([0, 0, 0, 1, 0, 0]);
    expect(Array.from(batch.targets)).toEqual([9, 9, 2, 7, 2, 2]);
  });

  it('rejects empty prompts and over-long completions with a message', () => {
    expect(() => packBatch([[]], [[1]], { padId: 0 })).toThrow(/empty/);
    expect(() => packBatch([[1]], [[1, 2, 3]], { padId: 0, completionWidth: 2 })).toThrow(
      /more than the width 2/,
    );
  });
});
