// The Content-Security-Policy is written twice: index.html's meta tag (the page) and the header
// (deploy/headers.json → nginx and vite: every response, workers included). Both must say the
// same, except frame-ancestors, which only a header can carry (browsers ignore it in a meta tag,
// with a console warning); only connect-src is wider than the app's own origin: https: for model
// URLs of another origin (Hugging Face).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

function parse(policy: string): Map<string, string[]> {
  return new Map(
    policy
      .split(';')
      .map((d) => d.trim().split(/\s+/))
      .filter((parts) => parts[0])
      .map(([name, ...values]) => [name, values]),
  );
}

const meta = /http-equiv="Content-Security-Policy"\s+content="([^"]+)"/.exec(
  readFileSync('index.html', 'utf8'),
)?.[1];
const header = /add_header Content-Security-Policy "([^"]+)"/.exec(
  readFileSync('deploy/nginx/grpo-headers.conf', 'utf8'),
)?.[1];

describe('Content-Security-Policy', () => {
  it('is declared in index.html and in the nginx headers', () => {
    expect(meta).toBeTruthy();
    expect(header).toBeTruthy();
  });

  it('says the same in both places (manifest-src only matters to the page)', () => {
    const a = parse(meta!);
    const b = parse(header!);
    a.delete('manifest-src');
    expect(b.get('frame-ancestors')).toEqual(["'none'"]);
    expect(a.has('frame-ancestors')).toBe(false);
    b.delete('frame-ancestors');
    expect(Object.fromEntries(b)).toEqual(Object.fromEntries(a));
  });

  it("allows https: model URLs in connect-src and keeps everything else to 'self'", () => {
    for (const policy of [parse(meta!), parse(header!)]) {
      expect(policy.get('connect-src')).toEqual(["'self'", 'https:']);
      expect(policy.get('default-src')).toEqual(["'self'"]);
      expect(policy.get('script-src')).toEqual(["'self'", "'wasm-unsafe-eval'"]);
      expect(policy.get('worker-src')).toEqual(["'self'", 'blob:']);
      expect(policy.get('object-src')).toEqual(["'none'"]);
      for (const [name, values] of policy) {
        if (name === 'connect-src') continue;
        if (name === 'frame-ancestors') {
          expect(values).toEqual(["'none'"]);
          continue;
        }
        expect(values, name).not.toContain('https:');
        expect(
          values.some((v) => v === '*' || v.includes('://')),
          name,
        ).toBe(false);
      }
    }
  });
});
