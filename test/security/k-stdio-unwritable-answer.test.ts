/**
 * [K63] (round-3 review): a stdio child answers a tools/call with a result nested 100 000 arrays
 * deep. V8's JSON.parse reads it, JSON.stringify cannot write it back. The POST whose answer failed
 * was never answered: its pending entry was taken before the write threw, and stopping the child
 * failed only the entries left. Every POST now ends: 502 while nothing of its answer is written,
 * else a JSON-RPC error event in place of the answer that cannot be written; the session goes on.
 * Fails when such a POST hangs until upstream_timeout or forever.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildGatewayCli, spawnGateway, writeConfigDir, type GatewayCli, type GatewayProcess } from '../helpers/gateway-process.js';
import { gatewayYaml } from '../helpers/gateway-config.js';
import { startLocalIssuer, type LocalIssuer } from '../helpers/local-issuer.js';

const SCRIPT = join(import.meta.dirname, 'review/deep-json-upstreams.mjs');
const INIT = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'r', version: '1' } } };
const call = (id: number | string, name: string) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: {} } });
const BOTH = 'application/json, text/event-stream';

let cli: GatewayCli;
let issuer: LocalIssuer;
let gw: GatewayProcess;
let session: string | undefined;

beforeAll(async () => {
  [cli, issuer] = await Promise.all([buildGatewayCli(), startLocalIssuer()]);
  const dir = await writeConfigDir({
    'gateway.yaml': gatewayYaml({ log_level: 'info' }),
    'route.yaml': {
      path: '/mcp',
      authorization_servers: [issuer.issuer],
      token: { jwt: { issuer: issuer.issuer, jwks_uri: issuer.jwksUri, algorithms: ['ES256'] } },
      // Long: a POST left to its timeout would show as a 504 after 20 s, not the 502 asserted.
      limits: { upstream_timeout: '20s' },
      upstream: { stdio: { command: process.execPath, args: [SCRIPT, 'stdio'] } },
    },
  });
  gw = await spawnGateway(cli, { configDir: dir });
  const init = await post(INIT, BOTH);
  session = init.headers.get('mcp-session-id') ?? undefined;
  await init.arrayBuffer();
}, 180_000);

afterAll(async () => {
  await gw?.stop();
  await issuer?.close();
});

async function post(body: unknown, accept: string): Promise<Response> {
  const token = await issuer.token({ audience: 'https://mcp.example.test/mcp', sub: 'alice' });
  return fetch(`${gw.url}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept, ...(session && { 'mcp-session-id': session }) },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(15_000),
  });
}

/** The JSON-RPC messages of an event-stream body. */
const events = (text: string) => [...text.matchAll(/^data: (.*)$/gm)].map((m) => JSON.parse(m[1]!) as { id: unknown; result?: unknown; error?: { code: number } });

describe('[K63] a stdio answer the gateway cannot write back ends its POST', () => {
  it('[K63] event-stream client: 502 at once, not a POST left hanging', async () => {
    const res = await post(call(2, 'deep'), BOTH);
    expect(res.status).toBe(502);
    expect(((await res.json()) as { error: string }).error).toBe('bad_gateway');
  });

  it('[K63] JSON-only client: 502 JSON', async () => {
    const res = await post(call(3, 'deep'), 'application/json');
    expect(res.status).toBe(502);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  });

  it('[K63] a batch whose stream is already open: the unwritable answer becomes a JSON-RPC error event, the others are delivered', async () => {
    const res = await post([call('a', 'ok'), call('b', 'deep'), call('c', 'ok')], BOTH);
    expect(res.status).toBe(200);
    const byId = new Map(events(await res.text()).map((m) => [m.id, m]));
    expect(byId.get('a')?.result).toBeDefined();
    expect(byId.get('b')?.error?.code).toBe(-32603);
    expect(byId.get('c')?.result).toBeDefined();
  });

  it('[K63] variant: the session outlives unwritable answers, whatever their order among plain ones', async () => {
    for (const names of [['deep', 'ok'], ['ok', 'deep', 'deep'], ['deep', 'deep', 'ok']]) {
      const answers = await Promise.all(names.map((name, i) => post(call(i + 10, name), 'application/json')));
      expect(answers.map((r) => r.status)).toEqual(names.map((n) => (n === 'ok' ? 200 : 502)));
      await Promise.all(answers.map((r) => r.arrayBuffer()));
    }
    const after = await post(call(99, 'ok'), BOTH);
    expect(after.status).toBe(200);
  });
});
