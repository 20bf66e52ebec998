// Dropped files and folders for the model picker (src/app/lib/drop.ts), with fake entries shaped as
// Chromium's webkitGetAsEntry() gives them, and the test-hook query flag (src/app/lib/test-hooks.ts).
import { describe, expect, it } from 'vitest';
import {
  collectDropped,
  describeDrop,
  dragHasFiles,
  type DropEntryLike,
  type DropItemLike,
} from '../../src/app/lib/drop';
import { splitTestHooks } from '../../src/app/lib/test-hooks';
import { filesSource } from '../../src/formats/model-source';

const file = (name: string, text = name) => new File([text], name);

function fileEntry(path: string, text?: string): DropEntryLike {
  const name = path.split('/').pop()!;
  return {
    isFile: true,
    isDirectory: false,
    name,
    fullPath: `/${path}`,
    file: (ok) => ok(file(name, text)),
  };
}

/** A directory whose reader hands out its children in batches of `batch`, then an empty one. */
function dirEntry(path: string, children: DropEntryLike[], batch = 2): DropEntryLike {
  return {
    isFile: false,
    isDirectory: true,
    name: path.split('/').pop()!,
    fullPath: `/${path}`,
    createReader() {
      let at = 0;
      return {
        readEntries(ok) {
          const out = children.slice(at, at + batch);
          at += out.length;
          setTimeout(() => ok(out), 0);
        },
      };
    },
  };
}

const item = (entry: DropEntryLike | null, loose: File | null = null): DropItemLike => ({
  kind: 'file',
  getAsFile: () => loose,
  webkitGetAsEntry: () => entry,
});

describe('dropped model files', () => {
  it('walks a dropped folder (in batches, nested) and keeps the paths', async () => {
    const folder = dirEntry('tiny', [
      fileEntry('tiny/config.json', '{"a":1}'),
      fileEntry('tiny/model.safetensors'),
      fileEntry('tiny/tokenizer.json'),
      dirEntry('tiny/extra', [fileEntry('tiny/extra/notes.txt')]),
      fileEntry('tiny/tokenizer_config.json'),
    ]);
    const dropped = await collectDropped({ items: [item(folder)] });
    expect(dropped.map((d) => d.path)).toEqual([
      'tiny/config.json',
      'tiny/model.safetensors',
      'tiny/tokenizer.json',
      'tiny/extra/notes.txt',
      'tiny/tokenizer_config.json',
    ]);
    expect(describeDrop(dropped)).toBe('dropped folder tiny (5 files)');
    // As the trainer worker reads them: the common top folder is dropped.
    const source = filesSource(
      dropped.map((d) => ({
        name: d.file.name,
        size: d.file.size,
        arrayBuffer: () => d.file.arrayBuffer(),
        webkitRelativePath: d.path,
      })),
    );
    expect(new TextDecoder().decode(await source.read('config.json'))).toBe('{"a":1}');
    expect(await source.list()).toContain('extra/notes.txt');
  });

  it('takes loose files (no entry API, e.g. a scripted DataTransfer) and skips strings', async () => {
    const dropped = await collectDropped({
      items: [
        item(null, file('config.json')),
        { kind: 'string', getAsFile: () => null },
        item(null, file('model.safetensors')),
      ],
    });
    expect(dropped.map((d) => d.path)).toEqual(['config.json', 'model.safetensors']);
    expect(describeDrop(dropped)).toBe('2 dropped files');
    expect(describeDrop(dropped.slice(0, 1))).toBe('1 dropped file');
  });

  it('falls back to dataTransfer.files when there are no items', async () => {
    const dropped = await collectDropped({ files: [file('config.json')] });
    expect(dropped.map((d) => d.path)).toEqual(['config.json']);
  });

  it('mixes dropped files and folders', async () => {
    const dropped = await collectDropped({
      items: [item(fileEntry('config.json')), item(dirEntry('sub', [fileEntry('sub/a.json')]))],
    });
    expect(dropped.map((d) => d.path)).toEqual(['config.json', 'sub/a.json']);
    expect(describeDrop(dropped)).toBe('2 dropped files');
  });

  it('only reacts to drags that carry files', () => {
    expect(dragHasFiles({ types: ['Files'] })).toBe(true);
    expect(dragHasFiles({ types: ['text/plain'] })).toBe(false);
    expect(dragHasFiles(null)).toBe(false);
  });
});

describe('test hooks flag', () => {
  it('is off without the flag and leaves the query alone', () => {
    expect(splitTestHooks('?numGenerations=2')).toEqual({
      enabled: false,
      rest: '?numGenerations=2',
    });
    expect(splitTestHooks('')).toEqual({ enabled: false, rest: '' });
  });

  it('is taken out of the query the config parser reads', () => {
    expect(splitTestHooks('?test-hooks=1&numGenerations=2')).toEqual({
      enabled: true,
      rest: '?numGenerations=2',
    });
    expect(splitTestHooks('?test-hooks=1')).toEqual({ enabled: true, rest: '' });
    expect(splitTestHooks('?test-hooks=0').enabled).toBe(false);
  });
});
