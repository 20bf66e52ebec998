// The e2e specs' error watch: uncaught page errors, and Svelte's update-loop error
// (effect_update_depth_exceeded) wherever it is logged, collected for a test to assert empty.
import type { Page } from '@playwright/test';

export function watchErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(`pageerror: ${String(e)}`));
  page.on('console', (m) => {
    if (/effect_update_depth_exceeded|Maximum update depth/.test(m.text()))
      errors.push(`console: ${m.text()}`);
  });
  return errors;
}
