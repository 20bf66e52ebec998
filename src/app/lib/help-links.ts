// Where each panel's help link points in the user guide (docs/guide/*.md, served with the app as
// guide/<page>.html by scripts/guide-pages.ts, precached for offline use). Anchors are GitHub's
// heading slugs; tests/unit/docs.test.ts checks that every target exists in the rendered guide.

export const HELP_LINKS = {
  train: { page: 'playground', anchor: 'train', label: 'Train' },
  inspect: { page: 'playground', anchor: 'inspect', label: 'Inspect' },
  learn: { page: 'playground', anchor: 'learn', label: 'Learn' },
  aha: { page: 'playground', anchor: 'the-aha-demo', label: 'the aha demo' },
  checkpoints: { page: 'playground', anchor: 'checkpoints', label: 'Checkpoints' },
  runs: { page: 'playground', anchor: 'runs', label: 'Runs' },
  model: { page: 'models', anchor: 'load-a-model', label: 'loading a model' },
  datasets: { page: 'datasets-and-rewards', anchor: 'tasks', label: 'tasks and datasets' },
  rewards: { page: 'datasets-and-rewards', anchor: 'custom-rewards', label: 'custom rewards' },
  recipes: { page: 'recipes', anchor: 'recipes', label: 'Recipes' },
} as const;

export type HelpTopic = keyof typeof HELP_LINKS;

/** The link's URL, relative to the app's page (the guide is served beside index.html). */
export function helpHref(topic: HelpTopic): string {
  const { page, anchor } = HELP_LINKS[topic];
  return `guide/${page}.html#${anchor}`;
}
