// The second bundled model (issue #38): 'tiny-student' resolves to its shipped folder on the
// command line (--model tiny-student) and in the trainer worker ({ kind: 'bundled', name }), which
// reads it over HTTP from the app's models/ folder (here public/ served by a small Node server) and
// loads it under its own label; a bundled choice without a name stays the tiny reasoner; the service
// worker's precache lists both model folders.
import 'fake-indexeddb/auto';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import { IDBFactory } from 'fake-indexeddb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUNDLED_MODEL_DIR, loadModel, modelFolder } from '../../src/cli/_session';
import { BUNDLED_MODELS, bundledLabel, isBundledName } from '../../src/core/bundled-models';
import { parameterCount } from '../../src/core/model-config';
import { modelDirs, precacheManifest } from '../../src/app/sw/precache-plugin';
import { nodeSandboxFactory } from '../../src/rewards/reward-sandbox-node';
import { GrpoStorage } from '../../src/storage/index';
import { createTrainerApi } from '../../src/worker/trainer-api';
import { testEngine } from '../kernels/harness';
import { tinyRunConfig } from '../support/worker-steps';

const PUBLIC = resolve('public');
const STUDENT_DIR = resolve('public/models/tiny-student');

/** Serves public/ as the app's server does its static files: GET only, 404 when absent. */
function servePublic(): Promise<{ server: Server; origin: string; served: string[] }> {
  const served: string[] = [];
  const server = createServer((req, res) => {
    const path = decodeURIComponent((req.url ?? '/').split('?')[0]);
    served.push(path);
    if (path.includes('..')) {
      res.statusCode = 400;
      res.end();
      return;
    }
    readFile(join(PUBLIC, path)).then(
      (bytes) => res.end(bytes),
      () => {
        res.statusCode = 404;
        res.end();
      },
    );
  });
  return new Promise((done) =>
    server.listen(0, '127.0.0.1', () =>
      done({
        server,
        origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        served,
      }),
    ),
  );
}

describe('bundled models', { timeout: 120_000 }, () => {
  let http: Awaited<ReturnType<typeof servePublic>>;
  beforeAll(async () => {
    http = await servePublic();
  });
  afterAll(() => new Promise<void>((done) => http.server.close(() => done())));

  it('names the two shipped folders', () => {
    expect(BUNDLED_MODELS).toEqual(['tiny-reasoner', 'tiny-student']);
    expect(isBundledName('tiny-student')).toBe(true);
    expect(isBundledName('bundled')).toBe(false);
    expect(bundledLabel()).toBe('tiny-reasoner (bundled)');
    expect(bundledLabel('tiny-student')).toBe('tiny-student (bundled)');
  });

  it('the command line resolves --model tiny-student to its shipped folder and loads it', async () => {
    expect(modelFolder('bundled')).toBe(BUNDLED_MODEL_DIR);
    expect(BUNDLED_MODEL_DIR).toBe(resolve('public/models/tiny-reasoner'));
    expect(modelFolder('tiny-reasoner')).toBe(BUNDLED_MODEL_DIR);
    expect(modelFolder('tiny-student')).toBe(STUDENT_DIR);
    expect(() => modelFolder('tiny-nobody')).toThrow(/'tiny-student' the bundled ones by name/);
    const student = await loadModel('tiny-student');
    expect(student.folder).toBe(STUDENT_DIR);
    expect(student.hf.config).toMatchObject({ hiddenSize: 48, numLayers: 4, numHeads: 4 });
    const reasoner = await loadModel('bundled');
    // Same tokenizer, about a third of the size (issue #38: a third or less).
    expect(student.tokenizer.vocabSize).toBe(reasoner.tokenizer.vocabSize);
    expect(parameterCount(student.hf.config)).toBeLessThanOrEqual(
      parameterCount(reasoner.hf.config) / 3,
    );
  });

  it('the worker previews and loads { kind: bundled, name: tiny-student } from models/', async () => {
    const api = createTrainerApi({
      createEngine: testEngine,
      sandboxFactory: () => nodeSandboxFactory(),
      openStorage: () => GrpoStorage.open({ indexedDB: new IDBFactory() }),
      modelsUrl: `${http.origin}/models/`,
    });
    const choice = { kind: 'bundled', name: 'tiny-student' } as const;
    const preview = await api.previewModel(choice, tinyRunConfig());
    expect(preview.label).toBe('tiny-student (bundled)');
    expect(preview.config.hiddenSize).toBe(48);
    const { model } = await api.loadModel(choice, tinyRunConfig());
    expect(model.label).toBe('tiny-student (bundled)');
    expect(model.parameterCount).toBe(preview.parameterCount);
    expect(http.served).toContain('/models/tiny-student/model.safetensors');
    expect(http.served.some((p) => p.startsWith('/models/tiny-reasoner/'))).toBe(false);
    // Without a name: the tiny reasoner, as before.
    const reasoner = await api.previewModel({ kind: 'bundled' }, tinyRunConfig());
    expect(reasoner.label).toBe('tiny-reasoner (bundled)');
    expect(reasoner.config.hiddenSize).toBe(80);
    expect(http.served).toContain('/models/tiny-reasoner/config.json');
  });

  it('the service worker precaches both model folders', () => {
    const { urls } = precacheManifest(PUBLIC);
    expect(modelDirs(urls)).toEqual(
      expect.arrayContaining(['/models/tiny-reasoner/', '/models/tiny-student/']),
    );
    for (const f of ['config.json', 'model.safetensors', 'tokenizer.json', 'README.md'])
      expect(urls).toContain(`/models/tiny-student/${f}`);
  });
});
