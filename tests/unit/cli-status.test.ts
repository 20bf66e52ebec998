// The command line's status line (src/cli/_train.ts terminalStatus): the phase of the step under
// way from the Run's onProgress, rewritten in place, erased between steps and before a log line.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { terminalStatus } from '../../src/cli/_train';

describe('terminal status line', () => {
  afterEach(() => vi.restoreAllMocks());

  it('rewrites the phase in place and erases it before each log line and after the step', () => {
    const written: string[] = [];
    const printed: string[] = [];
    vi.spyOn(console, 'log').mockImplementation((line: string) => printed.push(line));
    const status = terminalStatus({ write: (t: string) => written.push(t) }, 10);
    status.progress({ step: 3, phase: 'sampling', done: 2, total: 8 });
    status.progress({ step: 3, phase: 'backward', done: 1, total: 2 });
    status.log('step  3/10  reward 0.500');
    status.log('saved runs/x/checkpoint-3'); // nothing shown: nothing to erase
    status.progress({ step: 3, phase: 'checkpoint', done: null, total: null });
    status.progress(null);
    status.progress(null);
    expect(written).toEqual([
      '\r\x1b[Kstep 3/10: sampling 2/8 tokens',
      '\r\x1b[Kstep 3/10: forward + backward, pass 1/2',
      '\r\x1b[K',
      '\r\x1b[Kstep 3/10: saving the checkpoint',
      '\r\x1b[K',
    ]);
    expect(printed).toEqual(['step  3/10  reward 0.500', 'saved runs/x/checkpoint-3']);
  });
});
