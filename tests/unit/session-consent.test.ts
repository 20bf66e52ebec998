// Consent for custom reward code in the page's session (src/app/session.svelte.ts, consent.ts):
// a shared link's config applies without its code until the user allows it; a restore asks
// through the callback the worker calls before building the run; an imported file's code is shown
// before the file is stored; answers are remembered per code hash, so the same code asks once and
// a different code asks again.
import { describe, expect, it } from 'vitest';
import type * as Comlink from 'comlink';
import { Session } from '../../src/app/session.svelte';
import { checkpointFileConfig } from '../../src/app/stores/checkpoints.svelte';
import { canonicalCode, codeHash, ConsentMemory } from '../../src/app/consent';
import { resolveConfig } from '../../src/grpo/config';
import { encodeCheckpointFile } from '../../src/storage/transfer';
import type { TrainerApi } from '../../src/worker/trainer-api';
import type { CustomCodeConsent } from '../../src/rewards/reward-id';

const CODE = 'function reward({ completion }) {\n  return completion.length / 100;\n}';
const api = {} as Comlink.Remote<TrainerApi>;

/** Resolves once the session shows a consent dialog (askConsent hashes first, asynchronously). */
async function dialogOf(session: Session) {
  for (let i = 0; i < 100 && !session.consent; i++) await new Promise((r) => setTimeout(r, 1));
  return session.consent;
}

describe('consent memory', () => {
  it('hashes every id and source, in any key order', async () => {
    expect(await codeHash({ a: 'x', b: 'y' })).toBe(await codeHash({ b: 'y', a: 'x' }));
    expect(await codeHash({ a: 'x' })).not.toBe(await codeHash({ a: 'x ' }));
    expect(await codeHash({ a: 'x' })).not.toBe(await codeHash({ b: 'x' }));
    expect(await codeHash({ a: 'x' })).toMatch(/^[0-9a-f]{64}$/);
    expect(canonicalCode({ b: '2', a: '1' })).toBe('[["a","1"],["b","2"]]');
  });

  it('remembers both answers', () => {
    const m = new ConsentMemory();
    expect(m.get('h')).toBeUndefined();
    m.set('h', false);
    m.set('k', true);
    expect([m.get('h'), m.get('k')]).toEqual([false, true]);
  });
});

describe('a shared link with custom reward code', () => {
  const shared = {
    steps: 7,
    rewards: ['format', 'custom:len'],
    rewardWeights: [1, 2],
    customRewards: { len: CODE },
  };

  it('applies the rest at once and the code only when allowed', async () => {
    const session = new Session(api);
    const done = session.options.applyShared(shared);
    const dialog = await dialogOf(session);
    expect(dialog).toMatchObject({ origin: 'link', code: { len: CODE } });
    // While the dialog is open, the draft already has everything but the code.
    expect(session.options.draft.steps).toBe(7);
    expect(session.options.draft.rewards).toEqual(['format']);
    expect(session.options.draft.customRewards).toEqual({});
    session.answerConsent(true);
    await done;
    expect(session.consent).toBeNull();
    expect(session.options.draft.rewards).toEqual(['format', 'custom:len']);
    expect(session.options.draft.rewardWeights).toEqual([1, 2]);
    expect(session.options.draft.customRewards).toEqual({ len: CODE });
  });

  it('declining keeps the rest of the config and says what was left out', async () => {
    const session = new Session(api);
    const done = session.options.applyShared(shared);
    await dialogOf(session);
    session.answerConsent(false);
    await done;
    expect(session.options.draft.steps).toBe(7);
    expect(session.options.draft.rewards).toEqual(['format']);
    expect(session.options.draft.rewardWeights).toEqual([1]);
    expect(session.options.draft.customRewards).toEqual({});
    expect(session.banners.map((b) => b.message)).toEqual([
      'Not added: custom:len. The rest of the shared configuration is in the options.',
    ]);
  });

  it('the same code asks once per session, a different code asks again', async () => {
    const session = new Session(api);
    const first = session.askConsent('link', 'This link', { len: CODE });
    await dialogOf(session);
    session.answerConsent(true);
    expect(await first).toBe(true);
    expect(await session.askConsent('link', 'This link', { len: CODE })).toBe(true);
    expect(session.consent).toBeNull();
    const other = session.askConsent('link', 'This link', { len: CODE + ' ' });
    expect((await dialogOf(session))?.code).toEqual({ len: CODE + ' ' });
    session.answerConsent(false);
    expect(await other).toBe(false);
  });

  it('asks one question at a time', async () => {
    const session = new Session(api);
    const a = session.askConsent('link', 'A', { a: 'A' });
    const b = session.askConsent('import', 'B', { b: 'B' });
    expect((await dialogOf(session))?.subject).toBe('A');
    session.answerConsent(true);
    await a;
    expect((await dialogOf(session))?.subject).toBe('B');
    session.answerConsent(false);
    expect([await a, await b]).toEqual([true, false]);
  });
});

describe('restoring a checkpoint with custom reward code', () => {
  const withCode = resolveConfig({
    rewards: ['format', 'custom:len'],
    customRewards: { len: CODE },
  });
  const without = resolveConfig({ rewards: ['format'] });

  /** A fake worker: asks the page's consent callback, as trainer-api's restoreCheckpoint does. */
  function fakeApi() {
    const asked: Record<string, string>[] = [];
    const restoreCheckpoint = async (_id: string, _jsonl?: string, consent?: CustomCodeConsent) => {
      asked.push(withCode.customRewards);
      const allowed = !!consent && (await consent(withCode.customRewards));
      const config = allowed ? withCode : without;
      return { runId: 'r', runName: 'n', config, step: 4, history: [], plan: null };
    };
    return {
      asked,
      api: {
        restoreCheckpoint,
        restoreProblem: async () => null,
      } as unknown as Comlink.Remote<TrainerApi>,
    };
  }

  it('declining restores without it and says so', async () => {
    const { api: fake } = fakeApi();
    const session = new Session(fake);
    const restoring = session.checkpoints.restore('c');
    const dialog = await dialogOf(session);
    expect(dialog).toMatchObject({ origin: 'restore', code: { len: CODE } });
    session.answerConsent(false);
    await restoring;
    expect(session.options.draft.rewards).toEqual(['format']);
    expect(session.options.draft.customRewards).toEqual({});
    expect(session.training.applied?.rewards).toEqual(['format']);
    expect(session.banners.at(-1)?.title).toBe('Restored without its custom reward code');
  });

  it('allowing restores with it; its own code does not ask again in the session', async () => {
    const { api: fake } = fakeApi();
    const session = new Session(fake);
    const restoring = session.checkpoints.restore('c');
    await dialogOf(session);
    session.answerConsent(true);
    await restoring;
    expect(session.training.applied?.rewards).toEqual(['format', 'custom:len']);
    await session.checkpoints.restore('c');
    expect(session.consent).toBeNull();
    expect(session.training.applied?.customRewards).toEqual({ len: CODE });
  });
});

describe('importing a checkpoint file', () => {
  function file(config: Record<string, unknown>, name = 'x.grpockpt'): File {
    const bytes = encodeCheckpointFile(
      { format: 'grpo-playground-checkpoint', config },
      new Uint8Array(8),
    );
    return new File([bytes as Uint8Array<ArrayBuffer>], name);
  }

  it('reads the config from the manifest alone', async () => {
    expect(await checkpointFileConfig(file({ steps: 3 }))).toEqual({ steps: 3 });
    expect(await checkpointFileConfig(new File([new Uint8Array(4)], 'short'))).toBeNull();
  });

  it('shows the code before the file is stored; declining still imports it', async () => {
    const imported: string[] = [];
    const fake = {
      importCheckpoint: async (f: File) => {
        imported.push(f.name);
        return { id: 'c' };
      },
      listCheckpoints: async () => [],
      storageInfo: async () => null,
    } as unknown as Comlink.Remote<TrainerApi>;
    const session = new Session(fake);
    const importing = session.checkpoints.import(
      file({ rewards: ['custom:len'], customRewards: { len: CODE } }, 'mine.grpockpt'),
    );
    const dialog = await dialogOf(session);
    expect(dialog).toMatchObject({ origin: 'import', code: { len: CODE } });
    expect(imported).toEqual([]);
    session.answerConsent(false);
    await importing;
    expect(imported).toEqual(['mine.grpockpt']);
    expect(session.banners.at(-1)?.title).toBe(
      "Imported 'mine.grpockpt' without permission to run its reward code",
    );
  });

  it('refuses a file whose reward ids break the rule, before storing it', async () => {
    let called = false;
    const fake = {
      importCheckpoint: async () => (called = true),
    } as unknown as Comlink.Remote<TrainerApi>;
    const session = new Session(fake);
    await session.checkpoints.import(file({ customRewards: { 'a"b': CODE } }, 'bad.grpockpt'));
    expect(called).toBe(false);
    expect(session.consent).toBeNull();
    expect(session.banners[0].message).toMatch(
      /^bad\.grpockpt: config 'customRewards': reward id "a\\"b" contains a quote/,
    );
  });
});
