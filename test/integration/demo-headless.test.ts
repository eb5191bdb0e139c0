/**
 * The README's headless recipe runs against the demo: its machine client
 * (`demo-ci`, a secret new at each start) gets a token with
 * client_credentials and lists and calls tools through the real demo,
 * nothing but HTTP as curl would send it; a wrong secret gets no token. The
 * Inspector version the README pins is the one the demo prints.
 */
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_MACHINE_CLIENT, INSPECTOR_VERSION, startDemo, type RunningDemo } from '../../src/demo/demo.js';
import { freePort } from '../helpers/net.js';

let demo: RunningDemo;
let origin: string;
beforeAll(async () => {
  demo = await startDemo(await freePort());
  origin = new URL(demo.mcpUrl).origin;
}, 60_000);
afterAll(async () => {
  await demo?.close();
});

const tokenWith = (secret: string) =>
  fetch(`${origin}/token`, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`${DEMO_MACHINE_CLIENT}:${secret}`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'client_credentials', resource: demo.mcpUrl }),
  });

const rpc = (token: string, method: string, params: Record<string, unknown> = {}) =>
  fetch(demo.mcpUrl, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });

describe("the README's headless recipe against the demo", () => {
  it('client_credentials with the printed secret, then tools/list and a call; mcp:write tools stay out of reach', async () => {
    const res = await tokenWith(demo.machineSecret);
    expect(res.status).toBe(200);
    const { access_token: token, scope } = (await res.json()) as { access_token: string; scope: string };
    expect(scope).toBe('mcp:read');
    const init = await rpc(token, 'initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'ci', version: '0' } });
    expect(init.status).toBe(200);
    await init.arrayBuffer();
    const session = init.headers.get('mcp-session-id');
    const withSession = (method: string, params: Record<string, unknown> = {}) =>
      fetch(demo.mcpUrl, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18', ...(session && { 'mcp-session-id': session }) },
        body: JSON.stringify({ jsonrpc: '2.0', id: 2, method, params }),
      });
    const list = await withSession('tools/list');
    const text = await list.text();
    expect(list.status).toBe(200);
    expect(text).toContain('"echo"');
    expect(text).not.toContain('"delete_note"');
    const call = await withSession('tools/call', { name: 'echo', arguments: { message: 'hello' } });
    expect(call.status).toBe(200);
    expect(await call.text()).toContain('hello');
    expect((await withSession('tools/call', { name: 'add_note', arguments: { text: 'x' } })).status).toBe(403);
  });

  it('refuses another secret, and makes a new one at each start', async () => {
    expect((await tokenWith(`${demo.machineSecret}x`)).status).toBe(401);
    expect(demo.machineSecret).toMatch(/^[A-Za-z0-9_-]{32}$/);
  });

  it('the README pins the Inspector version the demo prints', async () => {
    const readme = await readFile(new URL('../../README.md', import.meta.url), 'utf8');
    const pinned = [...readme.matchAll(/@modelcontextprotocol\/inspector@(\d+\.\d+\.\d+)/g)].map((m) => m[1]);
    expect(pinned.length).toBeGreaterThan(1);
    expect(new Set(pinned)).toEqual(new Set([INSPECTOR_VERSION]));
  });
});
