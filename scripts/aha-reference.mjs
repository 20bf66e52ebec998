#!/usr/bin/env node
// Writes src/app/aha/reference.json: the slice of docs/aha/report.json (what `npm run aha`
// measured) that the Aha panel overlays on a live run: each seed's per-step curves (reflection
// rate, accuracy, accuracy of reflecting / non-reflecting completions, mean length, step time),
// its held-out evaluation before and after, the summary over seeds, the config and the machine
// and durations. The full report (472 KB, mostly completions) stays out of the app bundle.
// tests/unit/aha-reference.test.ts recomputes the slice from the committed report and compares it
// exactly, so the two cannot drift: rerun this script (npm run aha:reference) after `npm run aha`.
//
//   npm run aha:reference                   write src/app/aha/reference.json (this script)
//   node scripts/aha-reference.mjs --check  exit 1 when the committed file is out of date
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const REPORT_JSON = join(ROOT, 'docs', 'aha', 'report.json');
export const REFERENCE_JSON = join(ROOT, 'src', 'app', 'aha', 'reference.json');

/** The per-step metrics kept, each with the decimals it keeps (rates to 0.01 %, lengths to 0.01
 * token, step times to the ms: finer than any chart draws, and a third of the size). */
export const CURVES = {
  reflection_rate: 4,
  accuracy: 4,
  'reflection/accuracy_reflecting': 4,
  'reflection/accuracy_not_reflecting': 4,
  'completions/mean_length': 2,
  step_time: 3,
};

/** v rounded to `digits` decimals; a missing or non-finite value is null (a gap in the curve). */
export function round(v, digits) {
  if (typeof v !== 'number' || !Number.isFinite(v)) return null;
  return Number(v.toFixed(digits));
}

/** The slim reference of a parsed docs/aha/report.json. */
export function slimReference(report) {
  const adapter = report.machine?.adapter ?? {};
  return {
    source: 'docs/aha/report.json',
    command: report.command,
    preset: report.preset,
    heldOutPrompts: report.heldOutPrompts,
    samplesPerPrompt: report.samplesPerPrompt,
    machine: {
      cpu: report.machine?.cpu ?? null,
      cores: report.machine?.cores ?? null,
      adapter: [adapter.vendor, adapter.architecture].filter(Boolean).join(' '),
      isSoftware: adapter.isSoftware ?? null,
    },
    durationSeconds: report.durationSeconds,
    config: report.config,
    summary: report.summary,
    targets: report.targets,
    seeds: report.seeds.map((s) => ({
      seed: s.seed,
      trainSeconds: s.trainSeconds,
      base: s.base,
      final: s.final,
      steps: s.history.map((h) => h.step),
      curves: Object.fromEntries(
        Object.entries(CURVES).map(([key, digits]) => [
          key,
          s.history.map((h) => round(h.metrics[key], digits)),
        ]),
      ),
    })),
  };
}

/** The file's text (compact: the app imports it; the test compares it with the report). */
export function referenceText(reference) {
  return JSON.stringify(reference) + '\n';
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const text = referenceText(slimReference(JSON.parse(readFileSync(REPORT_JSON, 'utf8'))));
  if (process.argv.includes('--check')) {
    const ok = readFileSync(REFERENCE_JSON, 'utf8') === text;
    console.log(ok ? 'reference.json is up to date' : 'reference.json is out of date');
    process.exit(ok ? 0 : 1);
  }
  writeFileSync(REFERENCE_JSON, text);
  console.log(`wrote ${REFERENCE_JSON} (${text.length} bytes)`);
}
