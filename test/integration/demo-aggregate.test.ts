/**
 * The demo's aggregated route (issue 22 item 6): /all/mcp puts the demo MCP
 * server and server-memory (stdio) behind one route. Driven by the MCP
 * TypeScript SDK with the demo's machine client (mcp:read, one token for
 * the route): the merged list is exactly each server's list reached through
 * its own demo route, names shown as `{upstream}__{name}` (the same policy on
 * shown names filters the same tools out); calls reach the right server;
 * mcp:write tools of either server are refused.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_MACHINE_CLIENT, startDemo, type RunningDemo } from '../../src/demo/demo.js';
import { freePort } from '../helpers/net.js';

let demo: RunningDemo;
const clients: Client[] = [];
beforeAll(async () => {
  demo = await startDemo(await freePort());
}, 60_000);
afterAll(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await demo?.close();
});

async function tokenFor(resource: string): Promise<string> {
  const res = await fetch(`${new URL(resource).origin}/token`, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`${DEMO_MACHINE_CLIENT}:${demo.machineSecret}`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'client_credentials', resource }),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { access_token: string }).access_token;
}

async function connect(url: string): Promise<Client> {
  const token = await tokenFor(url);
  const client = new Client({ name: 'demo-aggregate-test', version: '0' });
  clients.push(client);
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  return client;
}

const textOf = (result: unknown) => ((result as { content: { type: string; text?: string }[] }).content ?? []).map((c) => c.text ?? '').join('');

describe("the demo's aggregated route, through the TS SDK", () => {
  it('lists every tool of both servers, as each is listed through its own route, under shown names', async () => {
    const [all, direct, memory] = await Promise.all([connect(demo.allUrl), connect(demo.mcpUrl), connect(demo.memoryUrl)]);
    const shown = (await all.listTools()).tools;
    const expected = [...(await direct.listTools()).tools.map((t) => ({ ...t, name: `demo__${t.name}` })), ...(await memory.listTools()).tools.map((t) => ({ ...t, name: `memory__${t.name}` }))];
    expect(shown.map((t) => t.name).sort()).toEqual(expected.map((t) => t.name).sort());
    const byName = new Map(shown.map((t) => [t.name, t]));
    for (const tool of expected) expect(byName.get(tool.name)).toEqual(tool);
    // mcp:read only: the write tools of both servers are filtered, read tools of both are there.
    expect(byName.has('demo__echo') && byName.has('memory__read_graph')).toBe(true);
    expect(byName.has('demo__add_note') || byName.has('demo__shell') || byName.has('memory__create_entities')).toBe(false);
    expect(all.getServerVersion()?.name).toBe('mcp-auth-gateway');
  });

  it('calls reach the server the shown name leads to; write tools of either server are refused', async () => {
    const all = await connect(demo.allUrl);
    expect(textOf(await all.callTool({ name: 'demo__echo', arguments: { message: 'through /all' } }))).toContain('through /all');
    expect(JSON.parse(textOf(await all.callTool({ name: 'memory__read_graph', arguments: {} })))).toEqual({ entities: [], relations: [] });
    for (const name of ['demo__add_note', 'memory__create_entities']) await expect(all.callTool({ name, arguments: {} })).rejects.toThrow(/insufficient_scope/);
    await expect(all.callTool({ name: 'demo__shell', arguments: {} })).rejects.toThrow(/denied/);
  });
});
