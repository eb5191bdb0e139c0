/**
 * The 2026-07-28 wire through the gateway, as direct (DESIGN §8.4, issue 24 item 4), against the
 * stateless fixture server (test/helpers/stateless-mcp-server.ts), each exchange sent to the
 * upstream directly and through a route of the real gateway:
 * - `server/discover` answers alike;
 * - `subscriptions/listen` is a long-lived POST stream: `X-Accel-Buffering: no`, the keep-alive
 *   comments (on a route that filters tools/list too), change notifications pass; closing it closes
 *   the upstream request; a listen watching a resource the caller may not read is refused (403) and
 *   never reaches the upstream;
 * - `InputRequiredResult` retries with `inputResponses` are each judged as a new request: a caller
 *   without the tool's scope is refused on the retry however it got the `requestState`;
 * - the upstream's own 405 (GET, DELETE), 404/-32601 and 400/-32022 reach the client untouched;
 * - `Mcp-Method` / `Mcp-Name` are required where 2026-07-28 requires them, by the gateway too when
 *   the upstream would not check.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { gatewayYaml, jwtRoute, resourceOf, startTestIssuer, type TestIssuer } from '../helpers/security-fixtures.js';
import { startStatelessServer, type StatelessServer } from '../helpers/stateless-mcp-server.js';
import { waitFor } from '../helpers/stdio-stage.js';
import { post2026, readEventsUntil, WIRE_2026, type Wire2026Options } from '../helpers/wire-2026.js';

const VERSION = WIRE_2026;
const PLAIN = '/wire/mcp';
const FILTERING = '/wire-filtered/mcp';

let upstream: StatelessServer;
let issuer: TestIssuer;
let gw: TestGateway;
const tokens: Record<'reader' | 'writer' | 'admin' | 'filteredReader', string> = { reader: '', writer: '', admin: '', filteredReader: '' };

beforeAll(async () => {
  upstream = await startStatelessServer({ keepAliveMs: 40 });
  issuer = await startTestIssuer('RS256');
  const rules = [
    { match: { method: 'resources/read', uri: 'file:///secret/**' }, require_scopes: ['mcp:admin'] },
    { match: { method: 'tools/call', tool: 'test_input_required_result_request_state' }, require_scopes: ['mcp:write'] },
  ];
  const scopes = { scopes_supported: ['mcp:read', 'mcp:write', 'mcp:admin'], rules };
  gw = await startTestGateway({
    'gateway.yaml': gatewayYaml({ log_level: 'warn' }),
    'wire.yaml': jwtRoute(PLAIN, upstream.url, issuer, scopes),
    'wire-filtered.yaml': jwtRoute(FILTERING, upstream.url, issuer, { ...scopes, filter_tools_list: true }),
  });
  for (const [who, scope] of [['reader', 'mcp:read'], ['writer', 'mcp:read mcp:write'], ['admin', 'mcp:read mcp:admin']] as const) {
    tokens[who] = await issuer.mint({ aud: resourceOf(PLAIN), sub: who, client_id: 'app', scope });
  }
  tokens.filteredReader = await issuer.mint({ aud: resourceOf(FILTERING), sub: 'reader', client_id: 'app', scope: 'mcp:read' });
});

afterAll(async () => {
  await gw?.stop();
  await issuer?.close();
  await upstream?.close();
});

type Target = 'direct' | 'gateway';
interface Exchange {
  status: number;
  contentType: string | null;
  body: unknown;
}

const urlOf = (target: Target, path = PLAIN) => (target === 'direct' ? upstream.url : `${gw.url}${path}`);

/** A 2026-07-28 request, directly or through the gateway (with a token: the reader's unless given). */
function send(target: Target, method: string, params: Record<string, unknown> = {}, options: Wire2026Options & { path?: string } = {}): Promise<Response> {
  return post2026(urlOf(target, options.path), method, params, { ...options, token: target === 'gateway' ? (options.token ?? tokens.reader) : undefined });
}

async function exchange(res: Response): Promise<Exchange> {
  const text = await res.text();
  return { status: res.status, contentType: res.headers.get('content-type'), body: text === '' ? '' : (JSON.parse(text) as unknown) };
}

/** The same exchange directly and through the gateway. */
async function both(method: string, params: Record<string, unknown> = {}, options: Parameters<typeof send>[3] = {}): Promise<Record<Target, Exchange>> {
  return { direct: await exchange(await send('direct', method, params, options)), gateway: await exchange(await send('gateway', method, params, options)) };
}

const dataOf = (text: string) => [...text.matchAll(/^data: (.*)$/gm)].map((m) => JSON.parse(m[1]!) as { method?: string; params?: Record<string, unknown> });

describe('server/discover', () => {
  it('answers through the gateway as directly', async () => {
    const { direct, gateway } = await both('server/discover');
    expect(direct).toMatchObject({ status: 200, body: { result: { supportedVersions: [VERSION], resultType: 'complete' } } });
    expect(gateway).toEqual(direct);
  });
});

describe('subscriptions/listen', () => {
  for (const path of [PLAIN, FILTERING]) {
    it(`streams the acknowledgement, keep-alive comments and change notifications, with X-Accel-Buffering: no (${path})`, async () => {
      const aborted = new AbortController();
      const listens = upstream.listens.length;
      const res = await send('gateway', 'subscriptions/listen', { notifications: { toolsListChanged: true, resourceSubscriptions: ['file:///public/readme.txt'] } }, { path, token: path === PLAIN ? tokens.reader : tokens.filteredReader, signal: aborted.signal });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
      expect(res.headers.get('x-accel-buffering')).toBe('no');
      // Two keep-alives after the acknowledgement: they come through while nothing else does.
      const opened = await readEventsUntil(res, (t) => (t.match(/^:\r?$/gm) ?? []).length >= 2);
      expect(dataOf(opened)[0]).toMatchObject({ method: 'notifications/subscriptions/acknowledged', params: { notifications: { toolsListChanged: true, resourceSubscriptions: ['file:///public/readme.txt'] } } });

      expect((await send('gateway', 'tools/call', { name: 'test_trigger_tool_change', arguments: {} })).status).toBe(200);
      expect((await send('gateway', 'tools/call', { name: 'test_trigger_resource_update', arguments: { uri: 'file:///public/readme.txt' } })).status).toBe(200);
      const later = await readEventsUntil(res, (t) => t.includes('notifications/resources/updated'));
      expect(dataOf(later).map((m) => m.method)).toEqual(['notifications/tools/list_changed', 'notifications/resources/updated']);

      // Closing the stream closes the upstream request, which would otherwise stay open for good.
      const record = upstream.listens[listens]!;
      expect(record.closedAt).toBeUndefined();
      aborted.abort();
      await waitFor(() => record.closedAt !== undefined, 5_000, 'the upstream listen request closed');
    });
  }

  it('is refused (403, nothing forwarded) when it watches a resource the caller may not read; allowed for a caller who may', async () => {
    const params = { notifications: { resourceSubscriptions: ['file:///public/readme.txt', 'file:///secret/key.txt'] } };
    const listens = upstream.listens.length;
    const refused = await send('gateway', 'subscriptions/listen', params, { token: tokens.reader });
    expect(refused.status).toBe(403);
    await refused.body?.cancel();
    expect(upstream.listens.length).toBe(listens);

    const aborted = new AbortController();
    const allowed = await send('gateway', 'subscriptions/listen', params, { token: tokens.admin, signal: aborted.signal });
    expect(allowed.status).toBe(200);
    const text = await readEventsUntil(allowed, (t) => t.includes('acknowledged'));
    expect(dataOf(text)[0]!.params).toMatchObject({ notifications: { resourceSubscriptions: params.notifications.resourceSubscriptions } });
    aborted.abort();
    expect(upstream.listens[listens]!.resourceSubscriptions).toEqual(params.notifications.resourceSubscriptions);
  });
});

describe('InputRequiredResult retries', () => {
  const TOOL = 'test_input_required_result_request_state';

  it('run as directly: the same rounds, and the retry completes', async () => {
    for (const target of ['direct', 'gateway'] as const) {
      const first = (await exchange(await send(target, 'tools/call', { name: 'test_input_required_result_multi_round', arguments: {} }))).body as { result: { resultType: string; requestState: string } };
      expect(first.result.resultType, target).toBe('input_required');
      const second = (await exchange(await send(target, 'tools/call', { name: 'test_input_required_result_multi_round', arguments: {}, inputResponses: { name: { action: 'accept', content: { name: 'Ada' } } }, requestState: first.result.requestState }))).body as { result: { resultType: string; requestState: string; inputRequests: object } };
      expect(second.result, target).toMatchObject({ resultType: 'input_required', inputRequests: { color: { method: 'elicitation/create' } } });
      const third = await exchange(await send(target, 'tools/call', { name: 'test_input_required_result_multi_round', arguments: {}, inputResponses: { color: { action: 'accept', content: { color: 'blue' } } }, requestState: second.result.requestState }));
      expect(third, target).toMatchObject({ status: 200, body: { result: { resultType: 'complete', content: [{ text: 'three rounds done' }] } } });
    }
  });

  it('are each judged as a new request: a retry carrying another caller\'s requestState is refused without the tool\'s scope, nothing forwarded', async () => {
    const first = (await exchange(await send('gateway', 'tools/call', { name: TOOL, arguments: {} }, { token: tokens.writer }))).body as { result: { resultType: string; requestState: string } };
    expect(first.result.resultType).toBe('input_required');
    const retry = { name: TOOL, arguments: {}, inputResponses: { confirm: { action: 'accept', content: { name: 'Ada' } } }, requestState: first.result.requestState };
    const before = upstream.methods.length;
    const refused = await send('gateway', 'tools/call', retry, { token: tokens.reader });
    expect(refused.status).toBe(403);
    await refused.body?.cancel();
    expect(upstream.methods.length).toBe(before);
    expect(await exchange(await send('gateway', 'tools/call', retry, { token: tokens.writer }))).toMatchObject({ status: 200, body: { result: { resultType: 'complete' } } });
  });
});

describe("the upstream's own answers pass untouched", () => {
  it('405 to GET and DELETE', async () => {
    for (const method of ['GET', 'DELETE']) {
      const direct = await fetch(upstream.url, { method });
      const gateway = await fetch(`${gw.url}${PLAIN}`, { method, headers: { authorization: `Bearer ${tokens.reader}`, accept: 'text/event-stream', 'mcp-protocol-version': VERSION } });
      expect([gateway.status, gateway.headers.get('allow')], method).toEqual([direct.status, direct.headers.get('allow')]);
      expect(direct.status).toBe(405);
    }
  });

  it('404 with -32601 for a method the upstream lacks, 400 with -32022 for a revision it does not speak, -32602 for an unknown resource', async () => {
    const unknown = await both('ping');
    expect(unknown.direct).toMatchObject({ status: 404, body: { error: { code: -32601 } } });
    expect(unknown.gateway).toEqual(unknown.direct);
    const revision = await both('tools/list', {}, { version: '2099-01-01' });
    expect(revision.direct).toMatchObject({ status: 400, body: { error: { code: -32022, data: { supported: [VERSION] } } } });
    expect(revision.gateway).toEqual(revision.direct);
    const missing = await both('resources/read', { uri: 'file:///public/none.txt' });
    expect(missing.direct).toMatchObject({ status: 400, body: { error: { code: -32602, data: { uri: 'file:///public/none.txt' } } } });
    expect(missing.gateway).toEqual(missing.direct);
  });
});

describe('Mcp-Method and Mcp-Name where 2026-07-28 requires them', () => {
  it('a request without them is 400 -32020 directly and through the gateway, which forwards nothing', async () => {
    for (const [method, params, drop] of [
      ['tools/list', {}, 'mcp-method'],
      ['tools/call', { name: 'echo', arguments: {} }, 'mcp-name'],
      ['resources/read', { uri: 'file:///public/readme.txt' }, 'mcp-name'],
    ] as const) {
      const before = upstream.methods.length;
      const gateway = await exchange(await send('gateway', method, params, { headers: { [drop]: undefined } }));
      expect(upstream.methods.length, `${method} without ${drop}`).toBe(before);
      const direct = await exchange(await send('direct', method, params, { headers: { [drop]: undefined } }));
      for (const answer of [direct, gateway]) expect(answer, `${method} without ${drop}`).toMatchObject({ status: 400, body: { id: 1, error: { code: -32020 } } });
    }
  });

  it('an older revision without them is forwarded as before', async () => {
    const res = await send('gateway', 'tools/list', {}, { version: '2025-11-25', headers: { 'mcp-method': undefined } });
    // The fixture speaks 2026-07-28 only: its own -32022 shows the request reached it.
    expect(await exchange(res)).toMatchObject({ status: 400, body: { error: { code: -32022 } } });
  });
});
