/**
 * Round-3 review: long-lived POST streams. A 2026-07-28 `subscriptions/listen` is a POST whose event
 * stream stays open as long as the client likes (keep-alive comments; POST event streams are never cut
 * as stalled, H40), each holding a client socket and an upstream connection. [K80]: they count in the
 * same per-user share as GET streams (`limits.max_get_streams_per_user`); one user held 40 with a share
 * of 4 before. [K-streams]: like a GET stream, a listen stream ends when its token expires (it went on
 * delivering after exp before). Fails when listen POSTs are outside the share or outlive their token.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { opensLongLivedStream } from '../../src/proxy/long-lived-request.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { gatewayYaml, jwtRoute, now, resourceOf, startTestIssuer, type TestIssuer } from '../helpers/security-fixtures.js';
import { startStatelessServer, type StatelessServer } from '../helpers/stateless-mcp-server.js';
import { post2026, WIRE_2026 } from '../helpers/wire-2026.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/scripted-upstream.js';
import { waitFor } from '../helpers/wait.js';

const PATH = '/wire/mcp';
const SHARE = 4;
const LISTEN = 'subscriptions/listen';
const LISTEN_PARAMS = { notifications: { toolsListChanged: true } };
const META = { 'io.modelcontextprotocol/protocolVersion': WIRE_2026, 'io.modelcontextprotocol/clientCapabilities': {} };
let upstream: StatelessServer;
let streaming: ScriptedUpstream;
let issuer: TestIssuer;
let gw: TestGateway;
const aborted = new AbortController();

const mint = (sub: string, path = PATH, exp?: number) => issuer.mint({ aud: resourceOf(path), sub, client_id: 'app', ...(exp === undefined ? {} : { exp }) });
const listen = (token: string) => post2026(`${gw.url}${PATH}`, LISTEN, LISTEN_PARAMS, { token, signal: aborted.signal });

/** `subscriptions/listen` as JSON text, each character `\u`-escaped (or `/` as `\/`) where `escaped` says. */
function spelled(escaped: boolean[]): string {
  return [...LISTEN].map((c, i) => (escaped[i] ? (c === '/' && i % 2 === 0 ? '\\/' : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`) : c)).join('');
}

beforeAll(async () => {
  upstream = await startStatelessServer({ keepAliveMs: 200 });
  streaming = await startScriptedUpstream();
  issuer = await startTestIssuer('RS256');
  gw = await startTestGateway({
    'gateway.yaml': gatewayYaml({ log_level: 'warn' }),
    'wire.yaml': jwtRoute(PATH, upstream.url, issuer, { limits: { max_get_streams_per_user: SHARE } }),
    'get.yaml': jwtRoute('/get/mcp', streaming.url, issuer, { limits: { max_get_streams_per_user: SHARE } }),
  });
});

afterAll(async () => {
  aborted.abort();
  await gw?.stop();
  await issuer?.close();
  await upstream?.close();
  await streaming?.close();
});

describe('[K80] subscriptions/listen streams count in the per-user stream share', () => {
  it(`[K80] control: GET streams stop at the share (${SHARE})`, async () => {
    const token = await mint('mallory', '/get/mcp');
    const statuses: number[] = [];
    for (let i = 0; i < SHARE + 2; i++) {
      const res = await fetch(`${gw.url}/get/mcp`, { headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream', 'mcp-protocol-version': '2025-06-18' }, signal: aborted.signal });
      statuses.push(res.status);
    }
    expect(statuses.filter((s) => s === 429).length).toBe(2);
  });

  it(`[K80] of ${SHARE * 10} subscriptions/listen POSTs of one user, ${SHARE} are held open; the rest get 429 with Retry-After`, async () => {
    const token = await mint('mallory');
    const answers: Response[] = [];
    for (let i = 0; i < SHARE * 10; i++) answers.push(await listen(token));
    expect(answers.filter((r) => r.status === 200).length).toBe(SHARE);
    const refused = answers.filter((r) => r.status === 429);
    expect(refused.length).toBe(SHARE * 9);
    expect(refused.every((r) => Number(r.headers.get('retry-after')) > 0)).toBe(true);
  }, 60_000);

  it('[K80] with the share held by listens, a GET of the same user is refused too (one share), and another user is served', async () => {
    const get = await fetch(`${gw.url}${PATH}`, { headers: { authorization: `Bearer ${await mint('mallory')}`, accept: 'text/event-stream', 'mcp-protocol-version': WIRE_2026 }, signal: aborted.signal });
    expect(get.status).toBe(429);
    const other = await listen(await mint('bob'));
    expect(other.status).toBe(200);
  });

  it('[K80] a listen spelled with JSON escapes is counted too: 429 at the share, whatever the spelling (property)', async () => {
    const token = await mint('mallory');
    await fc.assert(
      fc.asyncProperty(fc.array(fc.boolean(), { minLength: LISTEN.length, maxLength: LISTEN.length }), async (escaped) => {
        const body = `{"jsonrpc":"2.0","id":1,"method":"${spelled(escaped)}","params":${JSON.stringify({ ...LISTEN_PARAMS, _meta: META })}}`;
        expect(opensLongLivedStream('POST', Buffer.from(body))).toBe(true);
        const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': WIRE_2026, 'mcp-method': LISTEN };
        const res = await fetch(`${gw.url}${PATH}`, { method: 'POST', headers, body, signal: aborted.signal });
        expect(res.status).toBe(429);
      }),
      { numRuns: 20 },
    );
  }, 60_000);

  it('[K80] no other method opens a long-lived stream, whatever the text of the body (property)', () => {
    fc.assert(
      fc.property(fc.string().filter((m) => m !== LISTEN), fc.jsonValue(), (method, params) => {
        const body = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }));
        expect(opensLongLivedStream('POST', body)).toBe(false);
        expect(opensLongLivedStream('GET', body)).toBe(true);
      }),
    );
  });
});

describe('[K-streams] a subscriptions/listen stream ends with the token that opened it', () => {
  it('[K-streams] a listen stream opened with a token that expires 2 s later delivers nothing 2 s after its exp', async () => {
    const exp = now() + 2;
    const res = await listen(await mint('carol', PATH, exp));
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    let lastChunkAt = 0;
    let ended = false;
    void (async () => {
      for (;;) {
        const r = await reader.read().catch(() => ({ done: true }));
        if (r.done) return void (ended = true);
        lastChunkAt = Date.now();
      }
    })();
    // Until the gateway ends it (at most 6 s, as before); once ended, nothing more can arrive.
    await waitFor(() => ended, 6_000, 'the listen stream to end').catch(() => undefined);
    expect(lastChunkAt).toBeGreaterThan(0);
    expect(lastChunkAt - exp * 1000).toBeLessThan(2_000);
    expect(ended).toBe(true);
  }, 20_000);
});
