/**
 * The demo's stdio route (server-memory) runs in a bubblewrap sandbox when bwrap works here, and
 * unsandboxed when it does not, so the README's first command works on a machine without
 * bubblewrap. The sandboxed demo route end to end (OAuth, browser) is test/e2e/as-demo.test.ts;
 * here the real server-memory is driven through the demo's own route settings by the SDK client.
 * Needs bubblewrap (.ci/run installs it).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DEMO_MEMORY_ROUTE_PATH, demoCanSandbox, demoConfig, demoConfigFiles, demoSandbox } from '../../src/demo/demo.js';
import { connectClient, resultText, startStdioStage, type StdioStage } from '../helpers/stdio-stage.js';

const noBwrap = mkdtempSync(join(tmpdir(), 'mag-no-bwrap-'));
let stage: StdioStage | undefined;
afterAll(async () => {
  await stage?.close();
  rmSync(noBwrap, { recursive: true, force: true });
});

describe('the demo and bubblewrap', () => {
  it('sandboxes its stdio route when bwrap works, and leaves it unsandboxed (still loading) without bwrap', async () => {
    expect(await demoCanSandbox()).toBe(true);
    expect(await demoCanSandbox(noBwrap)).toBe(false);
    const memoryRoute = (config: Awaited<ReturnType<typeof demoConfig>>) => config.routes.find((r) => r.path === DEMO_MEMORY_ROUTE_PATH)!;
    expect(memoryRoute(await demoConfig(8080, 'http://127.0.0.1:3000/mcp', true)).stdio?.sandbox).toEqual(demoSandbox());
    expect(memoryRoute(await demoConfig(8080, 'http://127.0.0.1:3000/mcp', false)).stdio?.sandbox).toBeUndefined();
  });

  it("server-memory with the demo's own stdio settings (sandbox, no network): alice's graph is hers", async () => {
    const { memoryRoute } = demoConfigFiles(8080, 'http://127.0.0.1:3000/mcp', true);
    stage = await startStdioStage({ [DEMO_MEMORY_ROUTE_PATH]: { upstream: memoryRoute.upstream } });
    const alice = await connectClient(stage.url(DEMO_MEMORY_ROUTE_PATH), await stage.token(DEMO_MEMORY_ROUTE_PATH, 'alice'));
    const bob = await connectClient(stage.url(DEMO_MEMORY_ROUTE_PATH), await stage.token(DEMO_MEMORY_ROUTE_PATH, 'bob'));
    try {
      await alice.client.callTool({ name: 'create_entities', arguments: { entities: [{ name: 'alice-only', entityType: 'note', observations: ['private'] }] } });
      expect(resultText(await alice.client.callTool({ name: 'read_graph', arguments: {} }))).toContain('alice-only');
      expect(resultText(await bob.client.callTool({ name: 'read_graph', arguments: {} }))).not.toContain('alice-only');
    } finally {
      await Promise.all([alice.client.close(), bob.client.close()]);
    }
  });
});
