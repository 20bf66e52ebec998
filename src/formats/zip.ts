// The one ZIP writer (store method, no compression) so the browser can hand over a folder — an
// exported TRL project or a Hugging Face model folder — as one download, without a dependency.
// Safetensors weights barely compress, so "store" loses little.
// Format: PKWARE APPNOTE 6.3 local headers + central directory; UTF-8 names (flag bit 11).

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

export function crc32(bytes: Uint8Array): number {
  let crc = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) crc = CRC_TABLE[(crc ^ bytes[i]) & 0xff] ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

/** A store-only ZIP of `files` (name → bytes or text), in insertion order, under `folder/`. */
export function zipFiles(files: ReadonlyMap<string, Uint8Array | string>, folder = ''): Uint8Array {
  const encoder = new TextEncoder();
  const prefix = folder ? `${folder.replace(/\/+$/, '')}/` : '';
  const entries = [...files].map(([name, content]) => {
    const data = typeof content === 'string' ? encoder.encode(content) : content;
    const nameBytes = encoder.encode(prefix + name);
    if (data.length >= 0xffffffff)
      throw new RangeError(`${name} is too large for a ZIP without ZIP64`);
    return { nameBytes, data, crc: crc32(data) };
  });
  const localSize = entries.reduce((s, e) => s + 30 + e.nameBytes.length + e.data.length, 0);
  // Offsets in the central directory are 32-bit too: the whole archive must stay below 4 GiB.
  if (localSize >= 0xffffffff)
    throw new RangeError('files over 4 GiB in all need ZIP64 (not written)');
  const centralSize = entries.reduce((s, e) => s + 46 + e.nameBytes.length, 0);
  const out = new Uint8Array(localSize + centralSize + 22);
  const view = new DataView(out.buffer);
  let offset = 0;
  const offsets: number[] = [];
  // DOS date/time fixed at 1980-01-01 00:00 so the same files give the same bytes.
  const DOS_DATE = (0 << 9) | (1 << 5) | 1;
  for (const e of entries) {
    offsets.push(offset);
    view.setUint32(offset, 0x04034b50, true);
    view.setUint16(offset + 4, 20, true); // version needed
    view.setUint16(offset + 6, 0x0800, true); // UTF-8 names
    view.setUint16(offset + 8, 0, true); // stored
    view.setUint16(offset + 10, 0, true);
    view.setUint16(offset + 12, DOS_DATE, true);
    view.setUint32(offset + 14, e.crc, true);
    view.setUint32(offset + 18, e.data.length, true);
    view.setUint32(offset + 22, e.data.length, true);
    view.setUint16(offset + 26, e.nameBytes.length, true);
    view.setUint16(offset + 28, 0, true);
    out.set(e.nameBytes, offset + 30);
    out.set(e.data, offset + 30 + e.nameBytes.length);
    offset += 30 + e.nameBytes.length + e.data.length;
  }
  const centralStart = offset;
  entries.forEach((e, i) => {
    view.setUint32(offset, 0x02014b50, true);
    view.setUint16(offset + 4, 20, true); // version made by
    view.setUint16(offset + 6, 20, true);
    view.setUint16(offset + 8, 0x0800, true);
    view.setUint16(offset + 10, 0, true);
    view.setUint16(offset + 12, 0, true);
    view.setUint16(offset + 14, DOS_DATE, true);
    view.setUint32(offset + 16, e.crc, true);
    view.setUint32(offset + 20, e.data.length, true);
    view.setUint32(offset + 24, e.data.length, true);
    view.setUint16(offset + 28, e.nameBytes.length, true);
    // extra, comment, disk, internal attributes: 0
    view.setUint32(offset + 38, 0, true); // external attributes
    view.setUint32(offset + 42, offsets[i], true);
    out.set(e.nameBytes, offset + 46);
    offset += 46 + e.nameBytes.length;
  });
  view.setUint32(offset, 0x06054b50, true);
  view.setUint16(offset + 8, entries.length, true);
  view.setUint16(offset + 10, entries.length, true);
  view.setUint32(offset + 12, offset - centralStart, true);
  view.setUint32(offset + 16, centralStart, true);
  return out;
}
