// Types of scripts/aha-reference.mjs for tests/unit/aha-reference.test.ts.
export const REPORT_JSON: string;
export const REFERENCE_JSON: string;
export const CURVES: Record<string, number>;
export function round(v: unknown, digits: number): number | null;
export function slimReference(report: unknown): unknown;
export function referenceText(reference: unknown): string;
