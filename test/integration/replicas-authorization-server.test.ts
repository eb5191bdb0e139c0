/**
 * The built-in authorization server on two replicas (issue 5, item 2): two
 * gateway processes from the real command line, one redis-server, one
 * signing key (a `{ file }` secret), one public URL served by a loopback
 * balancer that the test steers request by request. Shown:
 * - a client registered on A authorizes on B, with the steps of one
 *   authorization alternating between the replicas;
 * - a code issued by A is redeemed once across both: of 20 concurrent
 *   redemptions split over A and B exactly one gets tokens, and the replays
 *   revoke what it got;
 * - a refresh family revoked on A is refused on B at once (measured);
 * - a replayed rotated refresh token on B revokes the family on A;
 * - consent given on A is honoured on B (no second consent page), and only
 *   in the browser that gave it;
 * - each replica counts what it issued (/metrics) and writes one audit line
 *   per registration, consent, issuance and revocation, with no secret.
 * Nothing on either replica caches client, grant or family state: every
 * check reads Redis, which is why revocation needs no pub/sub.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateSigningKey } from '../../src/authorization-server/keys/signing-keys.js';
import { headlessUser, type HeadlessUserLog } from '../helpers/authorization-server.js';
import { buildGatewayCli, spawnGateway, writeConfigDir, type GatewayProcess, type LogLine } from '../helpers/gateway-process.js';
import type { PageHandler } from '../helpers/mcp-client.js';
import { closeServer, freePort, listen } from '../helpers/net.js';
import { codeRequestUrl, newVerifier } from '../helpers/oauth-requests.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/scripted-upstream.js';

type Replica = 'A' | 'B';

/** One public origin in front of both replicas; `pick` chooses the replica for each request. */
class SteeringBalancer {
  readonly served: Array<{ replica: Replica; method: string; path: string }> = [];
  backends: Record<Replica, string> = { A: '', B: '' };
  pick: () => Replica = () => 'A';
  url = '';
  private server!: Server;

  async start(): Promise<void> {
    this.server = createServer((req, res) => this.route(req, res));
    this.url = `http://127.0.0.1:${await listen(this.server)}`;
  }

  /** Every request to the replica named. */
  pin(replica: Replica): void {
    this.pick = () => replica;
  }

  /** A, B, A, B... request by request. */
  alternate(): void {
    let next = 0;
    this.pick = () => (next++ % 2 === 0 ? 'A' : 'B');
  }

  close(): Promise<void> {
    return closeServer(this.server);
  }

  private route(req: IncomingMessage, res: ServerResponse): void {
    const replica = this.pick();
    this.served.push({ replica, method: req.method ?? '', path: (req.url ?? '').split('?')[0] as string });
    const out = request(`${this.backends[replica]}${req.url}`, { method: req.method, headers: req.headers, agent: false }, (upstream) => {
      res.writeHead(upstream.statusCode ?? 502, upstream.headers);
      upstream.pipe(res);
    });
    out.once('error', (err) => res.writeHead(599).end(err.message));
    req.pipe(out);
  }
}

/** A user agent whose cookies outlive one authorization (as a browser's do), for one origin. */
class Browser {
  private readonly cookies = new Map<string, string>();

  /** Follows redirects and pages from `authorizationUrl` until the redirect to `redirectUri`; returns it. */
  async authorize(authorizationUrl: URL, redirectUri: string, onPage: PageHandler): Promise<URL> {
    let next: { url: URL; method: string; body?: URLSearchParams } = { url: authorizationUrl, method: 'GET' };
    for (let step = 0; step < 10; step++) {
      const res = await fetch(next.url, {
        method: next.method,
        body: next.body,
        redirect: 'manual',
        headers: { cookie: [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ') },
      });
      for (const line of res.headers.getSetCookie()) {
        const pair = line.split(';')[0] as string;
        this.cookies.set(pair.slice(0, pair.indexOf('=')).trim(), pair.slice(pair.indexOf('=') + 1).trim());
      }
      const location = res.headers.get('location');
      if (res.status >= 300 && res.status < 400 && location) {
        await res.body?.cancel();
        const target = new URL(location, next.url);
        if (target.href.startsWith(redirectUri)) return target;
        next = { url: target, method: 'GET' };
        continue;
      }
      const page = { url: next.url, status: res.status, headers: res.headers, body: await res.text() };
      const submit = await onPage(page);
      if (!submit) throw new Error(`authorization stopped at ${page.status} ${page.url.href}: ${page.body.slice(0, 300)}`);
      next = { url: new URL(submit.url, next.url), method: submit.method ?? 'GET', body: submit.body };
    }
    throw new Error('authorization did not reach the redirect_uri');
  }
}

let cli: Awaited<ReturnType<typeof buildGatewayCli>>;
let redis: RedisServer;
let upstream: ScriptedUpstream;
const balancer = new SteeringBalancer();
let A: GatewayProcess;
let B: GatewayProcess;
let resource: string;
const urlOf = (replica: Replica) => (replica === 'A' ? A.url : B.url);

/** Every token, code and secret handed out, to prove none reaches a log line. */
const secrets: string[] = [];
/** What the replicas should have counted, by metric and label, summed over both. */
const expected = new Map<string, number>();
const count = (series: string) => expected.set(series, (expected.get(series) ?? 0) + 1);

beforeAll(async () => {
  [cli, redis, upstream] = await Promise.all([buildGatewayCli(), startRedisServer(), startScriptedUpstream(), balancer.start()]);
  resource = `${balancer.url}/mcp`;
  const configDir = await writeConfigDir({
    'gateway.yaml': [
      'listen: { host: 127.0.0.1, port: 0 }',
      `public_url: ${balancer.url}`,
      `store: { kind: redis, url: "${redis.url}", key_prefix: "replicas-as:", require_noeviction: true }`,
      'audit: { sink: stdout }',
      'authorization_server: { signing_key: { file: secrets/signing.jwk.json }, login: { kind: dev } }',
    ].join('\n'),
    'mcp.yaml': ['path: /mcp', `upstream: ${upstream.url}`, 'scopes_supported: [mcp:read, mcp:write]', 'required_scopes: [mcp:read]'].join('\n'),
  });
  // The one signing key every replica shares, as a mounted Secret would provide it.
  await mkdir(join(configDir, 'secrets'), { recursive: true });
  await writeFile(join(configDir, 'secrets', 'signing.jwk.json'), JSON.stringify(await generateSigningKey()), { mode: 0o600 });
  [A, B] = await Promise.all([spawnGateway(cli, { configDir }), spawnGateway(cli, { configDir })]);
  balancer.backends = { A: A.url, B: B.url };
}, 90_000);

afterAll(async () => {
  await Promise.all([A?.stop(), B?.stop()]);
  await Promise.all([balancer.close(), upstream?.close()]);
  await redis?.stop();
});

// --- the client side: plain RFC 6749/7591/7009 requests, to see every status ---

interface RegisteredClient {
  clientId: string;
  redirectUri: string;
}

async function register(): Promise<RegisteredClient> {
  const redirectUri = `http://127.0.0.1:${await freePort()}/callback`;
  const res = await fetch(`${balancer.url}/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: 'replica test', redirect_uris: [redirectUri], grant_types: ['authorization_code', 'refresh_token'], token_endpoint_auth_method: 'none' }),
  });
  expect(res.status).toBe(201);
  return { clientId: ((await res.json()) as { client_id: string }).client_id, redirectUri };
}

async function authorize(browser: Browser, client: RegisteredClient, log: HeadlessUserLog, scope = 'mcp:read'): Promise<{ code: string; verifier: string }> {
  const verifier = newVerifier();
  const state = randomBytes(16).toString('base64url');
  const url = codeRequestUrl(balancer.url, { client: { id: client.clientId, redirectUri: client.redirectUri }, verifier, state, resource, scope });
  const callback = await browser.authorize(url, client.redirectUri, headlessUser('alice', { log }));
  expect(callback.searchParams.get('state')).toBe(state);
  const code = callback.searchParams.get('code');
  expect(code, callback.href).toBeTruthy();
  secrets.push(code!);
  return { code: code!, verifier };
}

async function tokenRequest(replica: Replica, form: Record<string, string>): Promise<{ status: number; body: Record<string, string> }> {
  const res = await fetch(`${urlOf(replica)}/token`, { method: 'POST', body: new URLSearchParams(form) });
  const body = (await res.json()) as Record<string, string>;
  if (res.status === 200) {
    secrets.push(body.access_token!, body.refresh_token!);
    count(`mag_tokens_issued_total{grant_type="${form.grant_type}"}`);
  } else {
    count(`mag_token_errors_total{grant_type="${form.grant_type}",error="${body.error}"}`);
  }
  return { status: res.status, body };
}

const redeem = (replica: Replica, client: RegisteredClient, grant: { code: string; verifier: string }) =>
  tokenRequest(replica, { grant_type: 'authorization_code', client_id: client.clientId, code: grant.code, code_verifier: grant.verifier, redirect_uri: client.redirectUri, resource });

const refresh = (replica: Replica, client: RegisteredClient, refreshToken: string) =>
  tokenRequest(replica, { grant_type: 'refresh_token', client_id: client.clientId, refresh_token: refreshToken });

async function revoke(replica: Replica, client: RegisteredClient, token: string): Promise<number> {
  const res = await fetch(`${urlOf(replica)}/revoke`, { method: 'POST', body: new URLSearchParams({ client_id: client.clientId, token }) });
  await res.body?.cancel();
  return res.status;
}

/** A fresh client, authorized by a fresh browser on `replica`, its code redeemed there: the tokens. */
async function signedIn(replica: Replica): Promise<{ client: RegisteredClient; accessToken: string; refreshToken: string }> {
  balancer.pin(replica);
  const client = await register();
  const tokens = await redeem(replica, client, await authorize(new Browser(), client, { consentPages: [], loginPages: [] }));
  count('mag_consent_decisions_total{decision="allow"}');
  expect(tokens.status).toBe(200);
  return { client, accessToken: tokens.body.access_token!, refreshToken: tokens.body.refresh_token! };
}

const auditOf = (gateway: GatewayProcess): LogLine[] => gateway.logs.filter((l) => l.log === 'audit');

describe('built-in authorization server on two replicas sharing Redis', () => {
  it('a client registered on A authorizes on B, every step of the authorization on alternating replicas', async () => {
    balancer.pin('A');
    const client = await register();
    const mark = balancer.served.length;
    balancer.alternate();
    const log: HeadlessUserLog = { consentPages: [], loginPages: [] };
    const grant = await authorize(new Browser(), client, log);
    count('mag_consent_decisions_total{decision="allow"}');
    const steps = balancer.served.slice(mark);
    // /authorize, the consent form, the login form: handed from one replica to the other.
    expect(steps.map((s) => `${s.replica} ${s.method} ${s.path}`)).toEqual(['A GET /authorize', 'B POST /authorize/consent', 'A POST /authorize/login/dev']);
    expect([log.consentPages.length, log.loginPages.length]).toEqual([1, 1]);

    const tokens = await redeem('B', client, grant);
    expect(tokens.status).toBe(200);
    // The access token works through either replica.
    for (const replica of ['A', 'B'] as const) {
      const res = await fetch(`${urlOf(replica)}/mcp`, {
        method: 'POST',
        headers: { authorization: `Bearer ${tokens.body.access_token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
      });
      expect(res.status).toBe(200);
      await res.body?.cancel();
    }
    expect(auditOf(A)).toContainEqual(expect.objectContaining({ event: 'client_registered', client_id: client.clientId }));
    expect(auditOf(B)).toContainEqual(expect.objectContaining({ event: 'consent', decision: 'allow', client_id: client.clientId }));
    expect(auditOf(A)).toContainEqual(expect.objectContaining({ event: 'authorization_granted', sub: 'alice', client_id: client.clientId }));
    expect(auditOf(B)).toContainEqual(expect.objectContaining({ event: 'token_issued', grant_type: 'authorization_code', client_id: client.clientId, refresh: true }));
  });

  it('a code issued by A is redeemed once: of 20 concurrent redemptions over A and B exactly one wins, and the replays revoke its grant', async () => {
    balancer.pin('A');
    const client = await register();
    const grant = await authorize(new Browser(), client, { consentPages: [], loginPages: [] });
    count('mag_consent_decisions_total{decision="allow"}');
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => redeem(i % 2 === 0 ? 'A' : 'B', client, grant)));
    const winners = results.filter((r) => r.status === 200);
    expect(winners).toHaveLength(1);
    expect(results.filter((r) => r.status === 400 && r.body.error === 'invalid_grant')).toHaveLength(19);
    // RFC 6749 §4.1.2: a code used twice revokes what it issued, whichever replica saw the replay.
    const after = await refresh('A', client, winners[0]!.body.refresh_token!);
    expect(after).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    const replays = [...auditOf(A), ...auditOf(B)].filter((l) => l.event === 'grant_revoked' && l.reason === 'code_replay' && l.client_id === client.clientId);
    expect(replays.length).toBeGreaterThan(0);
    for (let i = 0; i < replays.length; i++) count('mag_grants_revoked_total{reason="code_replay"}');
  });

  it('a refresh family revoked on A is refused on B at once', async () => {
    const { client, refreshToken } = await signedIn('A');
    const rotated = await refresh('B', client, refreshToken);
    expect(rotated.status).toBe(200);
    const current = rotated.body.refresh_token!;

    const revokeStarted = performance.now();
    expect(await revoke('A', client, current)).toBe(200);
    count('mag_grants_revoked_total{reason="revoked_by_client"}');
    const revoked = performance.now();
    // The very first attempt on B after A answered is refused: nothing to propagate but Redis itself.
    const refused = await refresh('B', client, current);
    const refusedAt = performance.now();
    expect(refused).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    expect(refusedAt - revoked).toBeLessThan(1_000);
    console.info(`revocation on A → refusal on B: revoke took ${(revoked - revokeStarted).toFixed(1)} ms, B refused ${(refusedAt - revoked).toFixed(1)} ms after it returned (first attempt)`);
    expect(auditOf(A)).toContainEqual(expect.objectContaining({ event: 'grant_revoked', reason: 'revoked_by_client', sub: 'alice', client_id: client.clientId }));
  });

  it('a rotated refresh token replayed on B revokes the family on A', async () => {
    const { client, refreshToken: first } = await signedIn('B');
    const rotated = await refresh('A', client, first);
    expect(rotated.status).toBe(200);
    // Rotated again, so the first is past its retry grace (K75): presented, it is reuse.
    const again = await refresh('A', client, rotated.body.refresh_token!);
    expect(again.status).toBe(200);
    expect(await refresh('B', client, first)).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    count('mag_grants_revoked_total{reason="refresh_token_reuse"}');
    expect(await refresh('A', client, again.body.refresh_token!)).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    expect(auditOf(B)).toContainEqual(expect.objectContaining({ event: 'grant_revoked', reason: 'refresh_token_reuse', client_id: client.clientId }));
  });

  it('consent given on A is honoured on B, in the browser that gave it only', async () => {
    balancer.pin('A');
    const client = await register();
    const browser = new Browser();
    const log: HeadlessUserLog = { consentPages: [], loginPages: [] };
    expect((await redeem('A', client, await authorize(browser, client, log))).status).toBe(200);
    count('mag_consent_decisions_total{decision="allow"}');
    expect([log.consentPages.length, log.loginPages.length]).toEqual([1, 1]);

    balancer.pin('B');
    expect((await redeem('B', client, await authorize(browser, client, log))).status).toBe(200);
    count('mag_consent_decisions_total{decision="remembered"}');
    expect([log.consentPages.length, log.loginPages.length]).toEqual([1, 2]); // straight to the login
    expect(auditOf(B)).toContainEqual(expect.objectContaining({ event: 'consent', decision: 'allow', remembered: true, client_id: client.clientId }));

    // Controls: another browser, or more scopes, ask again on B.
    const other: HeadlessUserLog = { consentPages: [], loginPages: [] };
    await authorize(new Browser(), client, other);
    count('mag_consent_decisions_total{decision="allow"}');
    expect(other.consentPages).toHaveLength(1);
    await authorize(browser, client, log, 'mcp:read mcp:write');
    count('mag_consent_decisions_total{decision="allow"}');
    expect(log.consentPages).toHaveLength(2);
  });

  it('each replica counts what it issued, refused, decided and revoked: the sums over /metrics match', async () => {
    const scrape = async (gateway: GatewayProcess) => (await fetch(`${gateway.url}/metrics`)).text();
    const [a, b] = await Promise.all([scrape(A), scrape(B)]);
    const value = (text: string, series: string) => Number(text.split('\n').find((line) => line.startsWith(`${series} `))?.split(' ')[1] ?? 0);
    for (const [series, total] of expected) expect([series, value(a, series) + value(b, series)]).toEqual([series, total]);
    // Both replicas issued tokens: the counters are per pod, the dashboard sums them.
    expect(value(a, 'mag_tokens_issued_total{grant_type="authorization_code"}')).toBeGreaterThan(0);
    expect(value(b, 'mag_tokens_issued_total{grant_type="authorization_code"}')).toBeGreaterThan(0);
    expect(expected.get('mag_tokens_issued_total{grant_type="refresh_token"}')).toBeGreaterThan(0);
  });

  it('no token, code or secret reaches a log or audit line on either replica', () => {
    const logs = JSON.stringify([A.logs, B.logs]) + A.stderr() + B.stderr();
    expect(secrets.length).toBeGreaterThan(20);
    for (const secret of secrets) expect(logs.includes(secret), 'a secret in the logs').toBe(false);
  });
});
