// The user's answers to "run this custom reward code?", remembered per code hash for the browser
// session only (sessionStorage: gone when the tab closes), so that the same code from the same
// link, file or checkpoint asks once per session while any other code always asks. The hash
// covers every id and source together, so one changed character is a different code.

/** Where untrusted reward code came from; the consent dialog words its question after it. */
export type ConsentOrigin = 'link' | 'import' | 'restore' | 'recipe';

/** One question to the user: the code it is about, and where it came from. */
export interface ConsentRequest {
  origin: ConsentOrigin;
  /** What carries the code, as the dialog names it: the file name, the run name and step. */
  subject: string;
  /** The custom reward code by id (config.customRewards). */
  code: Record<string, string>;
  /** codeHash(code): the key the answer is remembered under. */
  hash: string;
}

const STORAGE_KEY = 'grpo-playground/custom-code-consent';

/** The code as one canonical string: entries sorted by id, so key order does not matter. */
export function canonicalCode(code: Record<string, string>): string {
  return JSON.stringify(Object.entries(code).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/**
 * Hex SHA-256 of the canonical code. Without SubtleCrypto (an insecure context), the canonical
 * string itself is the key: longer, but exact, so a different code can never reuse an answer.
 */
export async function codeHash(code: Record<string, string>): Promise<string> {
  const text = canonicalCode(code);
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) return `text:${text}`;
  const digest = await subtle.digest('SHA-256', new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('');
}

/** The session's answers by code hash: sessionStorage when the page has it, else memory only. */
export class ConsentMemory {
  #memory = new Map<string, boolean>();

  #storage(): Storage | null {
    try {
      return typeof sessionStorage === 'undefined' ? null : sessionStorage;
    } catch {
      // Storage blocked by the browser's settings: remember for this page only.
      return null;
    }
  }

  #read(): Record<string, boolean> {
    const raw = this.#storage()?.getItem(STORAGE_KEY);
    if (!raw) return {};
    try {
      const parsed = JSON.parse(raw) as unknown;
      return parsed && typeof parsed === 'object' ? (parsed as Record<string, boolean>) : {};
    } catch {
      return {};
    }
  }

  /** The remembered answer for this hash: true allowed, false declined, undefined never asked. */
  get(hash: string): boolean | undefined {
    const stored = this.#read()[hash];
    if (typeof stored === 'boolean') return stored;
    return this.#memory.get(hash);
  }

  set(hash: string, allowed: boolean): void {
    this.#memory.set(hash, allowed);
    const storage = this.#storage();
    if (!storage) return;
    try {
      storage.setItem(STORAGE_KEY, JSON.stringify({ ...this.#read(), [hash]: allowed }));
    } catch {
      // A full or blocked sessionStorage: the in-memory answer still holds for this page.
    }
  }
}
