// Reads the store-method ZIP files the app downloads (adapters, merged models, run files), for
// e2e checks of their entries.
import { expect } from '@playwright/test';

/** The entries of a store-method ZIP (src/formats/zip.ts writes no compression): name → bytes. */
export function unzipStored(zip: Uint8Array): Map<string, Uint8Array> {
  const view = new DataView(zip.buffer, zip.byteOffset, zip.byteLength);
  const files = new Map<string, Uint8Array>();
  let at = 0;
  while (at + 30 <= zip.length && view.getUint32(at, true) === 0x04034b50) {
    expect(view.getUint16(at + 8, true), 'compression method').toBe(0);
    const size = view.getUint32(at + 18, true);
    const nameLength = view.getUint16(at + 26, true);
    const extraLength = view.getUint16(at + 28, true);
    const name = new TextDecoder().decode(zip.subarray(at + 30, at + 30 + nameLength));
    const start = at + 30 + nameLength + extraLength;
    files.set(name, zip.slice(start, start + size));
    at = start + size;
  }
  return files;
}
