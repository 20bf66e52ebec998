// What an uncaptured GPU error says when it ends the device (src/engine/device.ts gpuErrorLoss,
// src/engine/engine.ts deviceLostError): its kind from its class, as browsers and Dawn name them,
// its message's first line (Dawn appends "While calling …" context lines), and the error a run
// then throws, for each kind and for a device the driver reset.
import { describe, expect, it } from 'vitest';
import { gpuErrorLoss } from '../../src/engine/device';
import { deviceLostError } from '../../src/engine/engine';

class GPUOutOfMemoryError {
  constructor(readonly message: string) {}
}
class GPUValidationError {
  constructor(readonly message: string) {}
}
class GPUInternalError {
  constructor(readonly message: string) {}
}

describe('gpuErrorLoss', () => {
  it('names the kind by the error class and keeps the first line of its message', () => {
    expect(
      gpuErrorLoss(
        new GPUOutOfMemoryError(
          'Allocation failed for [Buffer "act.l3.q"] (67108864 bytes).\n - While calling [Device].CreateBuffer',
        ),
      ),
    ).toEqual({
      type: 'device-lost',
      reason: 'out-of-memory',
      message: 'Allocation failed for [Buffer "act.l3.q"] (67108864 bytes).',
    });
    expect(gpuErrorLoss(new GPUValidationError('bad bind group')).reason).toBe('validation');
    expect(gpuErrorLoss(new GPUInternalError('driver fault')).reason).toBe('internal');
  });

  it('an unknown or empty error is an internal one with a message saying so', () => {
    expect(gpuErrorLoss(null)).toEqual({
      type: 'device-lost',
      reason: 'internal',
      message: 'the GPU reported an error without a message',
    });
    expect(gpuErrorLoss(new Error('\n - While calling x')).reason).toBe('internal');
  });
});

describe('deviceLostError', () => {
  const lost = (reason: string) => ({ type: 'device-lost' as const, reason, message: 'details' });

  it('says what happened for each reason', () => {
    expect(deviceLostError(lost('out-of-memory')).message).toBe(
      'The GPU ran out of memory: details',
    );
    expect(deviceLostError(lost('validation')).message).toBe(
      'The GPU reported a validation error: details',
    );
    expect(deviceLostError(lost('internal')).message).toBe(
      'The GPU reported an internal error: details',
    );
    expect(deviceLostError(lost('destroyed')).message).toBe(
      'GPU device was lost (destroyed): details',
    );
  });
});
