// The ZIP writer, read back by an independent implementation (Python's zipfile) and checked
// against a known CRC-32.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { crc32, zipFiles } from '../../src/formats/zip';

describe('zipFiles', () => {
  it('CRC-32 of "123456789" is the standard check value', () => {
    expect(crc32(new TextEncoder().encode('123456789'))).toBe(0xcbf43926);
  });

  it("writes an archive Python's zipfile reads back exactly (names, UTF-8, bytes, CRCs)", () => {
    const files = new Map<string, Uint8Array | string>([
      ['train_grpo.py', 'print("hello")\n'],
      ['données/ü.txt', 'unicode ✓'],
      ['weights.bin', Uint8Array.from({ length: 1000 }, (_, i) => (i * 7) & 0xff)],
    ]);
    const zip = zipFiles(files, 'export');
    const path = join(mkdtempSync(join(tmpdir(), 'zip-')), 'a.zip');
    writeFileSync(path, zip);
    const script = `
import json, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
assert z.testzip() is None
print(json.dumps({i.filename: list(z.read(i.filename)) for i in z.infolist()}))`;
    const read = JSON.parse(execFileSync('python3', ['-c', script, path], { encoding: 'utf8' }));
    const encoder = new TextEncoder();
    expect(Object.keys(read)).toEqual([
      'export/train_grpo.py',
      'export/données/ü.txt',
      'export/weights.bin',
    ]);
    for (const [name, content] of files) {
      const bytes = typeof content === 'string' ? encoder.encode(content) : content;
      expect(read[`export/${name}`]).toEqual(Array.from(bytes));
    }
    // Deterministic: the same files give the same bytes.
    expect(zipFiles(files, 'export')).toEqual(zip);
  });
});

describe('zipFiles: the central directory', () => {
  it('writes entries a ZIP reader can find, with correct CRCs', () => {
    expect(crc32(new TextEncoder().encode('123456789'))).toBe(0xcbf43926);
    const files = [
      { name: 'm/config.json', bytes: new TextEncoder().encode('{"a":1}') },
      { name: 'm/model.safetensors', bytes: Uint8Array.from({ length: 1000 }, (_, i) => i & 255) },
    ];
    const zip = zipFiles(new Map(files.map((f) => [f.name, f.bytes])));
    const view = new DataView(zip.buffer);
    // End of central directory: 2 entries; the central directory points at each local header.
    const end = zip.length - 22;
    expect(view.getUint32(end, true)).toBe(0x06054b50);
    expect(view.getUint16(end + 10, true)).toBe(2);
    let p = view.getUint32(end + 16, true);
    for (const f of files) {
      expect(view.getUint32(p, true)).toBe(0x02014b50);
      const nameLen = view.getUint16(p + 28, true);
      const name = new TextDecoder().decode(zip.subarray(p + 46, p + 46 + nameLen));
      expect(name).toBe(f.name);
      const local = view.getUint32(p + 42, true);
      expect(view.getUint32(local, true)).toBe(0x04034b50);
      const dataStart = local + 30 + view.getUint16(local + 26, true);
      const data = zip.subarray(dataStart, dataStart + view.getUint32(p + 24, true));
      expect(Buffer.from(data).equals(Buffer.from(f.bytes))).toBe(true);
      expect(view.getUint32(p + 16, true)).toBe(crc32(f.bytes));
      p += 46 + nameLen;
    }
  });
});

describe('trlExportArchive', () => {
  it('zips every file of the TRL export under the run folder', async () => {
    const { resolveConfig } = await import('../../src/grpo/config');
    const { trlExportArchive, trlExportFiles } = await import('../../src/export/trl-archive');
    const config = resolveConfig({ steps: 2, perStepPrompts: 2, evalPrompts: 3 });
    const files = trlExportFiles(config);
    expect([...files.keys()]).toEqual(
      expect.arrayContaining(['train_grpo.py', 'rewards.py', 'train.jsonl', 'eval.jsonl']),
    );
    expect(files.get('train.jsonl')!.trim().split('\n')).toHaveLength(4);
    const { fileName, bytes } = trlExportArchive(config);
    expect(fileName).toBe('grpo-countdown-trl.zip');
    const path = join(mkdtempSync(join(tmpdir(), 'zip-')), fileName);
    writeFileSync(path, bytes);
    const listed = execFileSync(
      'python3',
      [
        '-c',
        'import sys, zipfile; print("\\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))',
        path,
      ],
      { encoding: 'utf8' },
    );
    expect(listed.trim().split('\n').sort()).toEqual(
      [...files.keys()].map((f) => `grpo-countdown-trl/${f}`).sort(),
    );
  });
});
