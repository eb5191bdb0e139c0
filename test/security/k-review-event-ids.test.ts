/**
 * Review, round 3 — class: resuming another principal's event stream (MCP transports,
 * "Resumability and redelivery": a client reconnects with `Last-Event-ID` and the server replays
 * what followed that event on the stream it belongs to). An SDK server whose sessions share one
 * event store (its InMemoryEventStore, as the SDK's examples wire it) replays the stream the event
 * id names, whichever session asks: bob, on his own session, replayed alice's events. Sessions are
 * bound to principals (H42), event ids were not. The gateway records each event id it passes on
 * as the receiving principal's and refuses (400) a `Last-Event-ID` it did not pass on to the
 * caller, with the caller's own session or another's; nothing reaches the upstream then.
 * The upstream is the real TypeScript MCP SDK (McpServer, stateful Streamable HTTP, event store).
 */
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { closeServer, listen } from '../helpers/net.js';
import { gatewayYaml, jwtRoute, resourceOf, startTestIssuer, type TestIssuer } from '../helpers/security-fixtures.js';

const PATH = '/events/mcp';
let issuer: TestIssuer;
let upstream: Server;
let gw: TestGateway;
/** Every `Last-Event-ID` that reached the upstream. */
const resumedUpstream: string[] = [];

/** Stateful SDK server: a transport per session, one event store for all of them. */
async function startEventServer(): Promise<Server> {
  const eventStore = new InMemoryEventStore();
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const lastEventId = req.headers['last-event-id'];
        if (typeof lastEventId === 'string') resumedUpstream.push(lastEventId);
        const body = chunks.length ? (JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown) : undefined;
        const sessionId = req.headers['mcp-session-id'];
        let transport = typeof sessionId === 'string' ? transports.get(sessionId) : undefined;
        if (!transport) {
          transport = new StreamableHTTPServerTransport({ sessionIdGenerator: randomUUID, eventStore, onsessioninitialized: (id) => void transports.set(id, transport!) });
          const mcp = new McpServer({ name: 'events', version: '1' }, { capabilities: { tools: {}, logging: {} } });
          mcp.registerTool('diary', { description: 'writes three log lines, then answers' }, async (extra) => {
            for (let i = 1; i <= 3; i++) await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data: `diary line ${i}` } });
            return { content: [{ type: 'text', text: 'diary closed' }] };
          });
          await mcp.connect(transport);
        }
        await transport.handleRequest(req, res, body);
      })().catch(() => res.writeHead(500).end());
    });
  });
  await listen(server);
  return server;
}

beforeAll(async () => {
  [issuer, upstream] = await Promise.all([startTestIssuer('ES256'), startEventServer()]);
  const { port } = upstream.address() as { port: number };
  gw = await startTestGateway({ 'gateway.yaml': gatewayYaml({ log_level: 'warn' }), 'events.yaml': jwtRoute(PATH, `http://127.0.0.1:${port}/mcp`, issuer) });
}, 60_000);
afterAll(async () => {
  await gw?.stop();
  await issuer?.close();
  if (upstream) await closeServer(upstream);
});

const tokens = new Map<string, string>();
async function tokenOf(sub: string): Promise<string> {
  if (!tokens.has(sub)) tokens.set(sub, await issuer.mint({ aud: resourceOf(PATH), sub, client_id: 'app', scope: 'mcp:read', exp: Math.floor(Date.now() / 1000) + 600 }));
  return tokens.get(sub)!;
}

async function post(sub: string, sessionId: string | undefined, message: Record<string, unknown>): Promise<Response> {
  return fetch(`${gw.url}${PATH}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${await tokenOf(sub)}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-11-25',
      ...(sessionId && { 'mcp-session-id': sessionId }),
    },
    body: JSON.stringify({ jsonrpc: '2.0', ...message }),
  });
}

async function openSession(sub: string): Promise<string> {
  const res = await post(sub, undefined, { id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: sub, version: '1' } } });
  expect(res.status).toBe(200);
  await res.text();
  const sessionId = res.headers.get('mcp-session-id')!;
  (await post(sub, sessionId, { method: 'notifications/initialized' })).body?.cancel();
  return sessionId;
}

/** The `id:` of each event of an event stream, and its `data:` text. */
function eventsOf(text: string): { id?: string; data: string }[] {
  return text
    .split(/\n\n/)
    .filter((block) => block.trim() !== '')
    .map((block) => {
      const lines = block.split('\n');
      const id = lines.find((l) => l.startsWith('id:'))?.slice(3).trimStart();
      return { id, data: lines.filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n') };
    });
}

/** A tool call answered as an event stream: its events (ids and data). */
async function diary(sub: string, sessionId: string): Promise<{ id?: string; data: string }[]> {
  const res = await post(sub, sessionId, { id: 7, method: 'tools/call', params: { name: 'diary', arguments: {} } });
  expect(res.headers.get('content-type')).toContain('text/event-stream');
  return eventsOf(await res.text());
}

async function resume(sub: string, sessionId: string, lastEventId: string): Promise<{ status: number; text: string }> {
  const controller = new AbortController();
  const res = await fetch(`${gw.url}${PATH}`, {
    headers: { authorization: `Bearer ${await tokenOf(sub)}`, accept: 'text/event-stream', 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25', 'last-event-id': lastEventId },
    signal: controller.signal,
  });
  if (res.status !== 200) return { status: res.status, text: await res.text() };
  // A replay arrives at once; the stream then stays open for the session's notifications. Reading
  // stops as soon as the whole replay came; the deadline only ends a replay that never completes,
  // and is generous, as a loaded machine can take seconds to deliver one that does.
  let text = '';
  const reader = res.body!.getReader();
  const deadline = setTimeout(() => controller.abort(), 20_000);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += Buffer.from(value).toString('utf8');
      if ((text.match(/diary/g) ?? []).length >= 3 && text.includes('diary closed')) break;
    }
  } catch {
    // aborted: what arrived is what was replayed
  } finally {
    clearTimeout(deadline);
    controller.abort();
  }
  return { status: 200, text };
}

let alice = '';
let aliceEvents: { id?: string; data: string }[] = [];

describe('[K68] Last-Event-ID resumes only a stream passed on to the caller', () => {
  it("alice's tool call answers as an event stream whose events carry ids (the event store's)", async () => {
    alice = await openSession('alice');
    aliceEvents = await diary('alice', alice);
    expect(aliceEvents.filter((e) => e.data.includes('diary line')).length).toBe(3);
    expect(aliceEvents.every((e) => e.id !== undefined)).toBe(true);
  });

  it("bob's GET on his own session with alice's first event id: 400, nothing of hers, nothing reached the upstream (the review's reproduction)", async () => {
    const bob = await openSession('bob');
    const before = resumedUpstream.length;
    const first = aliceEvents[0]!.id!;
    const res = await resume('bob', bob, first);
    expect(res.status).toBe(400);
    expect(res.text).not.toContain('diary');
    expect(JSON.parse(res.text)).toMatchObject({ error: 'invalid_request' });
    expect(resumedUpstream.length).toBe(before);
  });

  it("bob's GET on alice's session: with her event id 400 (not his event), with his own 404 (not his session)", async () => {
    const before = resumedUpstream.length;
    const hers = await resume('bob', alice, aliceEvents[0]!.id!);
    expect(hers.status).toBe(400);
    expect(hers.text).not.toContain('diary');
    const bob = await openSession('bob');
    const own = await diary('bob', bob);
    const his = await resume('bob', alice, own[0]!.id!);
    expect(his.status).toBe(404);
    expect(his.text).not.toContain('diary');
    expect(resumedUpstream.length).toBe(before);
  });

  it('alice resumes her own stream after her first event: the events that followed are replayed to her', async () => {
    const res = await resume('alice', alice, aliceEvents[0]!.id!);
    expect(res.status).toBe(200);
    expect(res.text).toContain('diary line');
  });

  it('bob resumes his own stream on his own session', async () => {
    const bob = await openSession('bob');
    const own = await diary('bob', bob);
    const res = await resume('bob', bob, own[0]!.id!);
    expect(res.status).toBe(200);
    expect(res.text).toContain('diary line');
  });

  it('property: a Last-Event-ID not passed on to the caller never reaches the upstream (alice\'s ids, their variants, any string)', async () => {
    const bob = await openSession('bob');
    const aliceIds = aliceEvents.map((e) => e.id!);
    const ids = fc.oneof(
      fc.constantFrom(...aliceIds),
      fc.constantFrom(...aliceIds).map((id) => `${id} `),
      fc.constantFrom(...aliceIds).map((id) => id.toUpperCase()),
      fc.constantFrom(...aliceIds).map((id) => id.slice(0, -1)),
      fc.stringMatching(/^[\x21-\x7e]{1,80}$/),
    );
    await fc.assert(
      fc.asyncProperty(ids, async (lastEventId) => {
        fc.pre(lastEventId.trim() === lastEventId && lastEventId !== '');
        const before = resumedUpstream.length;
        const res = await resume('bob', bob, lastEventId);
        expect(res.status).toBe(400);
        expect(resumedUpstream.length).toBe(before);
      }),
      { numRuns: 30 },
    );
  });

  it("a POST carrying alice's event id as Last-Event-ID is refused too (400), and does not reach the upstream", async () => {
    const bob = await openSession('bob');
    const before = resumedUpstream.length;
    const res = await fetch(`${gw.url}${PATH}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${await tokenOf('bob')}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25', 'mcp-session-id': bob, 'last-event-id': aliceEvents[0]!.id! },
      body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'diary', arguments: {} } }),
    });
    expect(res.status).toBe(400);
    expect(await res.text()).not.toContain('diary');
    expect(resumedUpstream.length).toBe(before);
  });

  it('a Last-Event-ID past the length bound is refused unread', async () => {
    const res = await resume('alice', alice, 'x'.repeat(5000));
    expect(res.status).toBe(400);
  });
});
