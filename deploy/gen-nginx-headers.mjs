// Writes deploy/nginx/grpo-headers.conf from deploy/headers.json, the one list of security and
// isolation headers that vite.config.ts also serves (dev and preview), so that production, `npm
// start` and `npm run dev` cannot drift apart. `--check` only compares and exits 1 on a difference
// (tests/unit/headers.test.ts runs it).
//   node deploy/gen-nginx-headers.mjs [--check]
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const HEADERS_JSON = fileURLToPath(new URL('./headers.json', import.meta.url));
const NGINX_CONF = fileURLToPath(new URL('./nginx/grpo-headers.conf', import.meta.url));

/** The nginx snippet for a header map: one `add_header … always;` per header, in order. */
export function nginxHeadersConf(headers) {
  const lines = [
    '# GENERATED from deploy/headers.json by `node deploy/gen-nginx-headers.mjs`: edit that file, then',
    '# rerun the script (tests/unit/headers.test.ts fails while the two differ). Security and isolation',
    '# headers for every response, included in each location because an add_header inside a location',
    '# replaces all inherited ones. Why each header is there: the "//" note in headers.json.',
  ];
  for (const [name, value] of Object.entries(headers)) {
    if (!/^[A-Za-z0-9-]+$/.test(name) || /["\\\r\n]/.test(value)) {
      throw new Error(
        `deploy/headers.json: header ${JSON.stringify(name)} cannot be written for nginx`,
      );
    }
    lines.push(`add_header ${name} "${value}" always;`);
  }
  return `${lines.join('\n')}\n`;
}

export function readHeaders() {
  return JSON.parse(readFileSync(HEADERS_JSON, 'utf8')).headers;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const expected = nginxHeadersConf(readHeaders());
  if (process.argv.includes('--check')) {
    const actual = readFileSync(NGINX_CONF, 'utf8');
    if (actual !== expected) {
      console.error(
        'deploy/nginx/grpo-headers.conf differs from deploy/headers.json: run `node deploy/gen-nginx-headers.mjs`',
      );
      process.exit(1);
    }
  } else {
    writeFileSync(NGINX_CONF, expected);
  }
}
