/**
 * Review, round 3 — class: an authorization that ends while its event stream stays open. A token
 * authorizes requests; a GET event stream is one request that may stay open for hours (idle streams
 * are not cut by request timeouts, H40), carrying the server's notifications and its requests to
 * the client (sampling, elicitation). The token that opened it expires, or its grant is revoked
 * (J52: refused within 5 s on every replica, on new and kept-alive connections), and the stream
 * goes on delivering to a client that no longer holds any authorization.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startJwtStage, stopJwtStage, type JwtStage } from '../helpers/jwt-gateway.js';
import { gatewayYaml, jwtRoute, now, resourceOf, startRecordingUpstream, type RecordingUpstream } from '../helpers/security-fixtures.js';
import { headlessUser, startAsGateway, type AsGateway } from '../helpers/authorization-server.js';
import { followAuthorization } from '../helpers/mcp-client.js';
import { freePort } from '../helpers/net.js';
import { newVerifier, s256 } from '../helpers/oauth-requests.js';
import { waitFor } from '../helpers/wait.js';

const PATH = '/stream/mcp';
let stage: JwtStage;

beforeAll(async () => {
  stage = await startJwtStage((s) => ({
    'gateway.yaml': gatewayYaml({ log_level: 'warn' }),
    // 16 events 500 ms apart: the stream lives 8 s.
    'stream.yaml': jwtRoute(PATH, `${s.up.origin}/sse?events=16&gap=500`, s.issuer),
  }));
}, 60_000);
afterAll(async () => {
  if (stage) await stopJwtStage(stage);
});

/** Reads the stream until it ends or `ms` pass; returns when each event arrived (epoch ms), also pushed to `times` as they come. */
async function eventTimes(res: Response, ms: number, times: number[] = []): Promise<{ times: number[]; ended: boolean }> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  const deadline = Date.now() + ms;
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) {
      await reader.cancel();
      return { times, ended: false };
    }
    const next = await Promise.race([reader.read().catch(() => ({ done: true as const, value: undefined })), new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), left))]);
    if (next === 'timeout') continue;
    if (next.done) return { times, ended: true };
    text += decoder.decode(next.value, { stream: true });
    let at: number;
    while ((at = text.indexOf('\n\n')) >= 0) {
      text = text.slice(at + 2);
      times.push(Date.now());
    }
  }
}

describe('[K-streams] an event stream ends with the authorization that opened it', () => {
  it('a GET stream opened with a token that expires 2 s later delivers nothing after its exp', async () => {
    const exp = now() + 2;
    const token = await stage.issuer.mint({ aud: resourceOf(PATH), exp, scope: 'mcp:read' });
    const res = await fetch(`${stage.gw.url}${PATH}`, { headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' } });
    expect(res.status).toBe(200);
    const { times } = await eventTimes(res, 9_000);
    // Some events came while the token was valid…
    expect(times.filter((t) => t < exp * 1000).length).toBeGreaterThan(0);
    // …and none more than a second after it expired (the gateway's clock skew allowance is 0 here).
    expect(times.filter((t) => t > exp * 1000 + 1_000)).toEqual([]);
  }, 30_000);
});

describe('[K-streams] negatives: what the authorization still covers is not cut', () => {
  it('a GET stream whose token outlives it delivers every event', async () => {
    const token = await stage.issuer.mint({ aud: resourceOf(PATH), exp: now() + 300, scope: 'mcp:read' });
    const res = await fetch(`${stage.gw.url}${PATH}`, { headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' } });
    expect(res.status).toBe(200);
    const { times, ended } = await eventTimes(res, 15_000);
    expect(ended).toBe(true);
    expect(times).toHaveLength(16);
  }, 30_000);

  it("a POST's event-stream answer is not cut when the token expires meanwhile (a long tool call may finish)", async () => {
    const exp = now() + 2;
    const token = await stage.issuer.mint({ aud: resourceOf(PATH), exp, scope: 'mcp:read' });
    const res = await fetch(`${stage.gw.url}${PATH}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: '{"jsonrpc":"2.0","id":7,"method":"ping"}',
    });
    expect(res.status).toBe(200);
    const { times, ended } = await eventTimes(res, 15_000);
    expect(ended).toBe(true);
    expect(times).toHaveLength(16);
    expect(times.at(-1)!).toBeGreaterThan(exp * 1000 + 1_000);
  }, 30_000);
});

describe('[K-streams] a revoked grant ends the streams its tokens opened (built-in AS)', () => {
  let upstream: RecordingUpstream;
  let gateway: AsGateway;
  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    gateway = await startAsGateway({
      upstream: `${upstream.origin}/sse?events=40&gap=500`,
      routes: { 'stream.yaml': { path: '/revoked/mcp', scopes_supported: ['mcp:read'], required_scopes: ['mcp:read'] } },
      options: { registrationRateLimit: { max: 1000, windowMs: 60_000 } },
    });
  }, 60_000);
  afterAll(async () => {
    await gateway?.stop();
    await upstream?.close();
  });

  it('/revoke of the refresh token: the open GET stream ends within the revocation delay, the token is refused after', async () => {
    const redirectUri = `http://127.0.0.1:${await freePort()}/callback`;
    const registered = await fetch(`${gateway.issuer}/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'stream tests', redirect_uris: [redirectUri], token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'] }),
    });
    const clientId = ((await registered.json()) as { client_id: string }).client_id;
    const verifier = newVerifier();
    const resource = `${gateway.issuer}/revoked/mcp`;
    const url = new URL(`${gateway.issuer}/authorize`);
    url.search = new URLSearchParams({ response_type: 'code', client_id: clientId, redirect_uri: redirectUri, code_challenge: s256(verifier), code_challenge_method: 'S256', state: 'st', resource }).toString();
    const callback = await followAuthorization(url, redirectUri, { onPage: headlessUser('grace') });
    const tokenRes = await fetch(`${gateway.issuer}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'authorization_code', code: callback.searchParams.get('code')!, code_verifier: verifier, redirect_uri: redirectUri, client_id: clientId }).toString(),
    });
    const tokens = (await tokenRes.json()) as { access_token: string; refresh_token: string };
    const stream = await fetch(resource, { headers: { authorization: `Bearer ${tokens.access_token}`, accept: 'text/event-stream' } });
    expect(stream.status).toBe(200);
    const seen: number[] = [];
    const reading = eventTimes(stream, 18_000, seen);
    // Until an event has come on the stream (rather than a fixed 1.5 s), so one precedes the revocation.
    await waitFor(() => seen.length > 0, 10_000, 'an event before the revocation');
    const revokedAt = Date.now();
    const revoke = await fetch(`${gateway.issuer}/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: tokens.refresh_token, client_id: clientId }).toString(),
    });
    expect(revoke.status).toBe(200);
    const { times, ended } = await reading;
    expect(times.filter((t) => t < revokedAt).length).toBeGreaterThan(0);
    // Ended by the gateway long before the upstream's 20 s, within the 5 s promise plus the sweep.
    expect(ended).toBe(true);
    expect(times.filter((t) => t > revokedAt + 7_000)).toEqual([]);
    const again = await fetch(resource, { headers: { authorization: `Bearer ${tokens.access_token}`, accept: 'text/event-stream' } });
    expect(again.status).toBe(401);
    await again.body?.cancel();
  }, 60_000);
});
