// A model folder keeps its name from the page's pick to the exported adapter: the page's model store
// (src/app/stores/model.svelte.ts) names picked files after their folder (else config.json's
// _name_or_path, else architecture and size), the real worker API on Node WebGPU loads them under
// that name, the run's default name and a LoRA run's adapter_config.json (base_model_name_or_path)
// carry it. The Load button says Reload only for the files already loaded. No stubs: a tiny random
// Llama folder.
import 'fake-indexeddb/auto';
import type * as Comlink from 'comlink';
import { IDBFactory } from 'fake-indexeddb';
import { describe, expect, it } from 'vitest';
import { Session } from '../../src/app/session.svelte';
import { GrpoStorage } from '../../src/storage/index';
import { createTrainerApi, type TrainerApi } from '../../src/worker/trainer-api';
import { testEngine } from '../kernels/harness';
import { tinyHfFolder } from '../support/tiny-hf-model';

/** Files as <input webkitdirectory> gives them: 'folder/name' in webkitRelativePath. */
function pickFolder(files: Map<string, Uint8Array>, folder: string | null): File[] {
  return [...files].map(([name, bytes]) => {
    const file = new File([bytes.slice()], name);
    Object.defineProperty(file, 'webkitRelativePath', { value: folder ? `${folder}/${name}` : '' });
    return file;
  });
}

describe('a model picked as files', { timeout: 120_000 }, () => {
  it('is named after its folder, on the page, in the worker and in adapter_config.json', async () => {
    const folder = await tinyHfFolder();
    const api = createTrainerApi({
      createEngine: testEngine,
      openStorage: () => GrpoStorage.open({ indexedDB: new IDBFactory() }),
    });
    const session = new Session(api as unknown as Comlink.Remote<TrainerApi>);
    const n = folder.files.size;

    const picked = { kind: 'files' as const, files: pickFolder(folder.files, 'my-tiny-model') };
    await session.model.previewModel(picked);
    expect(session.model.previewError).toBeNull();
    expect(session.model.preview?.label).toBe('my-tiny-model');
    expect(session.model.source).toBe(`folder my-tiny-model (${n} files)`);
    expect(session.model.choiceLoaded).toBe(false);

    session.options.draft.usePeft = true;
    session.options.draft.loraR = 2;
    await session.model.load();
    expect(session.banners.map((b) => b.message)).toEqual([]);
    expect(session.model.info?.label).toBe('my-tiny-model');
    expect(session.model.name).toBe('my-tiny-model');
    expect(session.model.choiceLoaded).toBe(true);
    // The run's default name carries it too (grpo/run-name.ts: task · model · options).
    expect(session.training.runName).toMatch(/^countdown · my-tiny-model( ·|$)/);

    const exported = await api.exportModel('peft');
    const config = exported.find((f) => f.name === 'adapter_config.json')!;
    expect(JSON.parse(new TextDecoder().decode(config.bytes)).base_model_name_or_path).toBe(
      'my-tiny-model',
    );

    // Loose files (no folder): config.json's _name_or_path, else what the model is. Either is a
    // model not loaded yet, so the button loads rather than reloads.
    await session.model.previewModel({ kind: 'files', files: pickFolder(folder.files, null) });
    expect(session.model.preview?.label).toBe('LlamaForCausalLM (9.5 k parameters)');
    expect(session.model.source).toBe(`${n} selected files`);
    expect(session.model.choiceLoaded).toBe(false);

    const named = new Map(folder.files);
    const json = JSON.parse(new TextDecoder().decode(named.get('config.json')));
    named.set(
      'config.json',
      new TextEncoder().encode(JSON.stringify({ ...json, _name_or_path: 'org/tiny-llama' })),
    );
    await session.model.previewModel({ kind: 'files', files: pickFolder(named, null) });
    expect(session.model.preview?.label).toBe('org/tiny-llama');
  });
});
