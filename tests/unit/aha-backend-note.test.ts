// The Aha view's reference timing says which backend it was measured on and what this browser's
// adapter is (src/app/aha/AhaPanel.svelte), so a step many times slower than the reference's in a
// browser's CPU emulation is explained rather than left to look like a fault. Server-rendered.
import { render } from 'svelte/server';
import { describe, expect, it } from 'vitest';
import AhaPanel from '../../src/app/aha/AhaPanel.svelte';

const note = (adapter: { vendor: string; description: string; isSoftware: boolean } | null) => {
  const { body } = render(AhaPanel, { props: { history: [], reports: [], adapter } });
  const m = /data-testid="aha-reference-backend"[^>]*>([\s\S]*?)<\/span>/.exec(body);
  return (m?.[1] ?? '').replace(/<!--[^>]*-->/g, '').replace(/\s+/g, ' ');
};

describe('the Aha reference timing note', () => {
  it('names the reference backend and a software adapter here', () => {
    const t = note({ vendor: 'google', description: 'SwiftShader Device', isSoftware: true });
    expect(t).toContain('in Node, on Dawn’s Vulkan backend over SwiftShader (a CPU emulation');
    expect(t).toContain('adapter is SwiftShader Device, also emulated on the CPU');
    expect(t).toContain('several times the reference’s');
  });

  it('says a real GPU should be far faster, and when there is no adapter', () => {
    expect(note({ vendor: 'nvidia', description: '', isSoftware: false })).toContain(
      'adapter is nvidia, a real GPU: a step here should take far less',
    );
    expect(note(null)).toContain('unknown (no WebGPU adapter was found)');
  });
});
