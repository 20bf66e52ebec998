// Files and folders dropped on the model picker, as File objects with their paths inside the drop
// (a dropped folder 'tiny/' gives 'tiny/config.json' …), so they cross to the trainer worker like the
// file inputs' File lists and filesSource (src/formats/model-source.ts) strips the common top folder.
// Entries come from webkitGetAsEntry() where the browser gives them (real drags from the desktop);
// plain files (getAsFile()) otherwise, e.g. a DataTransfer built by a script.

export interface DroppedFile {
  file: File;
  /** Path inside the drop, '/'-separated, without a leading slash ('tiny/config.json'). */
  path: string;
}

// Minimal structural types of the entry API, which lib.dom types only partly.
export interface DropEntryLike {
  isFile: boolean;
  isDirectory: boolean;
  name: string;
  fullPath: string;
  file?(ok: (f: File) => void, fail: (e: unknown) => void): void;
  createReader?(): {
    readEntries(ok: (e: DropEntryLike[]) => void, fail: (e: unknown) => void): void;
  };
}

export interface DropItemLike {
  kind: string;
  getAsFile(): File | null;
  webkitGetAsEntry?(): DropEntryLike | null;
}

export interface DataTransferLike {
  items?: ArrayLike<DropItemLike> | null;
  files?: ArrayLike<File> | null;
  types?: ArrayLike<string> | null;
}

/** Whether a drag carries files (dragenter/dragover only see the types, not the files). */
export function dragHasFiles(dt: DataTransferLike | null | undefined): boolean {
  return !!dt?.types && Array.from(dt.types).includes('Files');
}

/** Folders deeper than this are not walked (a model folder is flat or one level deep). */
export const MAX_DROP_DEPTH = 8;

/**
 * The files of a drop. Call it synchronously in the `drop` handler: the items are readable only
 * during the event; the folder walk continues after it.
 */
export function collectDropped(dt: DataTransferLike): Promise<DroppedFile[]> {
  const entries: DropEntryLike[] = [];
  const loose: File[] = [];
  const items = dt.items ? Array.from(dt.items) : [];
  for (const item of items) {
    if (item.kind !== 'file') continue;
    const entry = item.webkitGetAsEntry?.() ?? null;
    if (entry) entries.push(entry);
    else {
      const f = item.getAsFile();
      if (f) loose.push(f);
    }
  }
  if (items.length === 0 && dt.files) loose.push(...Array.from(dt.files));

  const walk = async (entry: DropEntryLike, depth: number, out: DroppedFile[]): Promise<void> => {
    if (entry.isFile && entry.file) {
      const file = await new Promise<File>((ok, fail) => entry.file!(ok, fail));
      out.push({ file, path: entry.fullPath.replace(/^\/+/, '') || file.name });
    } else if (entry.isDirectory && entry.createReader && depth < MAX_DROP_DEPTH) {
      const reader = entry.createReader();
      // readEntries returns batches (100 in Chromium) until an empty one.
      for (;;) {
        const batch = await new Promise<DropEntryLike[]>((ok, fail) =>
          reader.readEntries(ok, fail),
        );
        if (batch.length === 0) break;
        for (const child of batch) await walk(child, depth + 1, out);
      }
    }
  };
  return (async () => {
    const out: DroppedFile[] = loose.map((file) => ({ file, path: file.name }));
    for (const entry of entries) await walk(entry, 0, out);
    return out;
  })();
}

/** A short description of what was dropped: 'folder tiny-reasoner (5 files)' or '3 dropped files'. */
export function describeDrop(dropped: readonly DroppedFile[]): string {
  const tops = new Set(dropped.map((d) => (d.path.includes('/') ? d.path.split('/')[0] : '')));
  const n = dropped.length;
  const files = `${n} file${n === 1 ? '' : 's'}`;
  if (tops.size === 1 && !tops.has('')) return `dropped folder ${[...tops][0]} (${files})`;
  return `${n} dropped file${n === 1 ? '' : 's'}`;
}
