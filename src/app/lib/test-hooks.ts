// The test-only debug hook: with `?test-hooks=1` in the page URL the app exposes a few actions on
// `window.__grpoTest` (e.g. losing the GPU device on purpose) for the end-to-end tests. Without the
// flag nothing is exposed. The flag is taken out before the rest of the query is read as a shared
// configuration (whose parser rejects unknown parameters).

export const TEST_HOOKS_PARAM = 'test-hooks';

/** Whether the query enables the hooks, and the query without the flag. */
export function splitTestHooks(search: string): { enabled: boolean; rest: string } {
  const params = new URLSearchParams(search);
  if (!params.has(TEST_HOOKS_PARAM)) return { enabled: false, rest: search };
  const value = params.get(TEST_HOOKS_PARAM);
  params.delete(TEST_HOOKS_PARAM);
  const rest = params.toString();
  return { enabled: value === '1' || value === 'true', rest: rest ? `?${rest}` : '' };
}
