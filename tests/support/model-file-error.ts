// The ModelFileError a reader throws on bad input, for tests that then check its file, field and
// message; fails the test when the call returns or throws anything else.
import { expect } from 'vitest';
import { ModelFileError } from '../../src/formats/errors';

export function modelFileErrorOf(fn: () => unknown): ModelFileError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ModelFileError);
    return err as ModelFileError;
  }
  throw new Error('expected a ModelFileError');
}
