/**
 * `upstream_auth: { kind: user_oauth }` end to end (DESIGN §8.1): a remote MCP server of the TS SDK
 * that wants its users' own tokens from its own AS (a real oidc-provider: resource indicators,
 * 6 s access tokens, refresh tokens, revocation, RFC 9728 metadata), behind two gateway replicas
 * sharing one real redis-server. The gateway discovers the upstream AS from the upstream's 401,
 * registers itself there once, and each user connects their own account through the URL
 * elicitation's link, in Chromium (playwright-core) for every page; MCP calls come from the TS SDK.
 * - connect through the elicitation (-32042 with the link; the link signs in, connects, works once);
 * - a link opened by another signed-in user connects nothing, and is spent;
 * - per-user isolation as a property: concurrent calls of three users on both replicas, with
 *   refreshes in flight, and the upstream never sees one user's token on another's request;
 * - one refresh under concurrency across both replicas;
 * - /account/apps lists the account; Disconnect revokes at the upstream AS (RFC 7009) and the next
 *   call gets a new link;
 * - no upstream token anywhere in the store (every key and value) or the logs.
 * Without /usr/bin/chromium these tests are skipped, with the reason in their names.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateSigningKey } from '../../src/authorization-server/keys/signing-keys.js';
import { recordingAudit } from '../helpers/authorization-server.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { devAuthorizationServer, gatewayYaml } from '../helpers/gateway-config.js';
import { freePort } from '../helpers/net.js';
import { codeRequestUrl, newVerifier } from '../helpers/oauth-requests.js';
import { startOAuthProtectedUpstream, type OAuthProtectedUpstream } from '../helpers/oauth-protected-upstream.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { sleepUntil } from '../helpers/wait.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const available = existsSync(CHROMIUM);
const TEST_MS = 120_000;
const ACCESS_TOKEN_TTL_S = 6;
const ROUTE = '/files/mcp';
const CALLBACK = 'http://127.0.0.1:1/callback';
/** The upstream's AS is on 127.0.0.1 (another port than the upstream): the discovery guard's test-only loopback allowance. */
const LOOPBACK_AS = { safeFetch: { allowLoopback: true } };

let browser: Browser;
let redis: RedisServer;
let upstream: OAuthProtectedUpstream;
let A: TestGateway;
let B: TestGateway;
let origin: string;
let keyPrefix: string;
const audit = recordingAudit();
/** The gateway access token of each user (one app approved by each). */
const tokens = new Map<string, string>();

beforeAll(async () => {
  if (!available) return;
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-sync'] });
  [redis, upstream] = await Promise.all([startRedisServer(), startOAuthProtectedUpstream({ accessTokenTtl: ACCESS_TOKEN_TTL_S })]);
  const env = { SIGNING_KEY: JSON.stringify(await generateSigningKey()), TOKENS_KEY: randomBytes(32).toString('base64') };
  const [portA, portB] = [await freePort(), await freePort()];
  origin = `http://127.0.0.1:${portA}`;
  keyPrefix = `uo-${randomBytes(4).toString('hex')}:`;
  const files = (port: number) => ({
    'gateway.yaml': gatewayYaml({
      listen: { host: '127.0.0.1', port },
      public_url: origin,
      log_level: 'debug',
      store: { kind: 'redis', url: redis.url, key_prefix: keyPrefix },
      authorization_server: devAuthorizationServer({ signing_key: { env: 'SIGNING_KEY' } }),
      account: { enabled: true },
      account_tokens: { encryption_key: { env: 'TOKENS_KEY' } },
    }),
    'files.yaml': { path: ROUTE, upstream: upstream.url, upstream_auth: { kind: 'user_oauth' } },
  });
  A = await startTestGateway(files(portA), env, { audit, authorizationServer: LOOPBACK_AS });
  B = await startTestGateway(files(portB), env, { authorizationServer: LOOPBACK_AS });
  // They decline at the upstream AS when asked at consent: the apps work, the accounts are not connected.
  for (const user of ['alice', 'bob', 'carol']) tokens.set(user, (await approveApp(user)).token);
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await A?.stop();
  await B?.stop();
  await upstream?.close();
  await redis?.stop();
});

async function newPage(): Promise<Page> {
  const page = await (await browser.newContext()).newPage();
  page.setDefaultTimeout(20_000);
  return page;
}

async function devSignIn(page: Page, user: string): Promise<void> {
  await page.locator('input[name="username"]').fill(user);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

/**
 * `user` approves a new app in the browser (consent, dev login; then, with no upstream grant yet,
 * the detour to the upstream AS, which signs in `upstreamAccount` or, undefined, is declined); its
 * access token and the consent page's text.
 */
async function approveApp(user: string, upstreamAccount?: string): Promise<{ token: string; consentText: string }> {
  const reg = await fetch(`${origin}/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: `${user}'s assistant`, redirect_uris: [CALLBACK], token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'] }),
  });
  const clientId = ((await reg.json()) as { client_id: string }).client_id;
  const verifier = newVerifier();
  const page = await newPage();
  try {
    upstream.signInAs(upstreamAccount);
    await page.goto(codeRequestUrl(origin, { client: { id: clientId, redirectUri: CALLBACK }, verifier, state: 's', resource: `${origin}${ROUTE}` }).href);
    const consentText = await page.locator('main').innerText();
    await page.getByRole('button', { name: 'Approve' }).click();
    const redirected = page.waitForRequest((r) => r.url().startsWith(CALLBACK));
    await devSignIn(page, user);
    const code = new URL((await redirected).url()).searchParams.get('code')!;
    const res = await fetch(`${origin}/token`, { method: 'POST', body: new URLSearchParams({ grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: CALLBACK, client_id: clientId }) });
    return { token: ((await res.json()) as { access_token: string }).access_token, consentText };
  } finally {
    await page.context().close();
  }
}

/** An SDK client of `user` connected to a replica. */
async function sdkClient(replica: TestGateway, user: string): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(new URL(`${replica.url}${ROUTE}`), { requestInit: { headers: { Authorization: `Bearer ${tokens.get(user)!}` } } });
  const client = new Client({ name: 'user-oauth-test', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

/** The connect link the gateway elicits for `user` (the SDK's initialize fails with -32042). */
async function elicitedLink(user: string, replica = A): Promise<string> {
  const err = await sdkClient(replica, user).then(
    (c) => c.close().then(() => undefined),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(McpError);
  expect((err as McpError).code).toBe(-32042);
  const [elicitation] = ((err as McpError).data as { elicitations: { mode: string; url: string }[] }).elicitations;
  expect(elicitation?.mode).toBe('url');
  return elicitation!.url;
}

/** `user` opens `link` in a fresh browser and signs in as `signInAs` (the upstream AS then signs in `upstreamAccount`); the final page's text. */
async function openLink(link: string, signInAs: string, upstreamAccount: string, page?: Page): Promise<string> {
  const own = page ?? (await newPage());
  upstream.signInAs(upstreamAccount);
  try {
    await own.goto(link);
    if (!page) await devSignIn(own, signInAs);
    await own.locator('h1').first().waitFor();
    await own.waitForLoadState('load');
    return await own.locator('main').innerText();
  } finally {
    if (!page) await own.context().close();
  }
}

async function whoami(replica: TestGateway, user: string): Promise<string> {
  const client = await sdkClient(replica, user);
  try {
    const result = await client.callTool({ name: 'whoami', arguments: {} });
    return (result.content as { text: string }[])[0]!.text;
  } finally {
    await client.close();
  }
}

async function connect(user: string): Promise<void> {
  const text = await openLink(await elicitedLink(user), user, `${user}-upstream`);
  expect(text).toContain('Account connected');
}

const describeBrowser = available ? describe : describe.skip;
const why = available ? '' : ` — SKIPPED: ${CHROMIUM} is missing`;

describeBrowser(`user_oauth: each user's own account at the upstream${why}`, () => {
  it('connects at consent: the page says the app acts with the user\'s own account there; one detour to the upstream AS, then the client\'s redirect; the first call works', async () => {
    const { token, consentText } = await approveApp('dave', 'dave-upstream');
    expect(consentText).toContain(`your own account at ${upstream.url}`);
    tokens.set('dave', token);
    expect(await whoami(B, 'dave')).toBe('dave-upstream');
    expect(audit.events.some((e) => e.event === 'upstream_account_connected' && e.sub === 'dave')).toBe(true);
    // Declined at consent (alice, bob, carol): the app got its code all the same, and nothing is connected.
    expect(audit.events.filter((e) => e.event === 'upstream_account_connect_failed').map((e) => e.sub).sort()).toEqual(['alice', 'bob', 'carol']);
  }, TEST_MS);

  it('connects through the URL elicitation: -32042 names the link, the link signs in and connects, the call then carries the user\'s own upstream token; the link works once', async () => {
    const link = await elicitedLink('alice');
    expect(new URL(link).origin).toBe(origin);
    expect(await openLink(link, 'alice', 'alice-upstream')).toContain('Account connected');
    expect(await whoami(A, 'alice')).toBe('alice-upstream');
    expect(await whoami(B, 'alice')).toBe('alice-upstream');
    expect(await openLink(link, 'alice', 'alice-upstream')).toContain('Link not valid');
    // The gateway registered itself once at the upstream AS, and asked for the resource's scopes.
    const asked = upstream.as.authorizationRequests.at(-1)!;
    expect(asked.get('resource')).toBe(upstream.url);
    expect(asked.get('scope')).toBe('files:read');
    expect(asked.get('code_challenge_method')).toBe('S256');
    expect(audit.events.some((e) => e.event === 'upstream_account_connected' && e.sub === 'alice' && e.route === ROUTE)).toBe(true);
  }, TEST_MS);

  it('a link opened by another signed-in user connects nothing, and is spent', async () => {
    const bobsLink = await elicitedLink('bob');
    // The same one live link, in the form of each revision: an InputRequiredResult for 2026-07-28, an error naming it before 2025-11-25.
    const raw = async (version: string) => {
      const res = await fetch(`${B.url}${ROUTE}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${tokens.get('bob')!}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': version, 'mcp-method': 'tools/list' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/list' }),
      });
      return { status: res.status, body: (await res.json()) as { id: number; result?: { inputRequests: { connect: { params: { url: string } } } }; error?: { message: string } } };
    };
    const latest = await raw('2026-07-28');
    expect([latest.status, latest.body.id, latest.body.result?.inputRequests.connect.params.url]).toEqual([200, 7, bobsLink]);
    expect((await raw('2025-06-18')).body.error?.message).toContain(bobsLink);
    const page = await newPage();
    try {
      // alice is signed in to her account pages in this browser.
      await page.goto(`${origin}/account/apps`);
      await devSignIn(page, 'alice');
      await page.getByRole('heading', { name: 'Connected apps' }).waitFor();
      const text = await openLink(bobsLink, 'alice', 'alice-upstream', page);
      expect(text).toContain('Not your link');
    } finally {
      await page.context().close();
    }
    await elicitedLink('bob');
    expect(await openLink(bobsLink, 'bob', 'bob-upstream')).toContain('Link not valid');
    expect(audit.events.some((e) => e.event === 'upstream_account_connect_failed' && e.sub === 'bob')).toBe(true);
  }, TEST_MS);

  it('per-user isolation: concurrent calls of three users on two replicas, refreshes in flight, each upstream request carries its own user\'s token', async () => {
    for (const user of ['bob', 'carol']) await connect(user);
    const users = ['alice', 'bob', 'carol'];
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(fc.constantFrom(...users), fc.boolean()), { minLength: 6, maxLength: 18 }), fc.integer({ min: 0, max: 2500 }), async (calls, pauseMs) => {
        await new Promise((r) => setTimeout(r, pauseMs));
        // A failed call shows in the assertion's diff with its error (which replica, which user, what it got).
        const answers = await Promise.all(calls.map(([user, onA]) => whoami(onA ? A : B, user).catch((err: unknown) => `failed on ${onA ? 'A' : 'B'}: ${String(err).slice(0, 300)}`)));
        expect(answers).toEqual(calls.map(([user]) => `${user}-upstream`));
      }),
      // No shrinking: a run is seconds of SDK sessions on token timing, and shrinking one failure outlived the test and bled into the next.
      { numRuns: 8, endOnFailure: true },
    );
    // Each token the upstream saw belongs to exactly one of its users.
    const owner = new Map<string, string>();
    for (const { token, sub } of upstream.seen) {
      expect(owner.get(token) ?? sub).toBe(sub);
      owner.set(token, sub);
    }
    expect(upstream.refreshes).toBeGreaterThan(0);
    // Up to 9 rounds of up to 18 concurrent SDK sessions on two replicas: 61 s at load 15, half of TEST_MS.
  }, 2 * TEST_MS);

  it('one refresh under concurrency: an expired grant used by 16 calls on both replicas is refreshed once', async () => {
    await whoami(A, 'carol');
    // A second past the lifetime of carol's current upstream token, counted from its first use (the gateway
    // obtained it before that) rather than from now: expired for the gateway too, at most ACCESS_TOKEN_TTL_S + 1 s as before.
    const current = upstream.seen.filter((s) => s.sub === 'carol-upstream').at(-1)!.token;
    const firstUse = upstream.seen.find((s) => s.token === current)!.at;
    await sleepUntil(firstUse + (ACCESS_TOKEN_TTL_S + 1) * 1000);
    const before = upstream.refreshes;
    const answers = await Promise.all(Array.from({ length: 16 }, (_, i) => whoami(i % 2 ? A : B, 'carol')));
    expect(answers.every((a) => a === 'carol-upstream')).toBe(true);
    expect(upstream.refreshes - before).toBe(1);
  }, TEST_MS);

  it('an upstream 401 to a stored token leads to one refresh and the request sent again with the new token', async () => {
    await whoami(A, 'alice');
    // Whole seconds (iat): the tokens alice holds now are refused, the next one is not.
    const refuseBefore = Math.ceil(Date.now() / 1000) * 1000;
    upstream.refuseIssuedBefore.set('alice-upstream', refuseBefore);
    // The next token the upstream AS issues (same clock) has an iat of refuseBefore or later.
    await sleepUntil(refuseBefore);
    const [refreshes, refused] = [upstream.refreshes, upstream.refused];
    expect(await whoami(B, 'alice')).toBe('alice-upstream');
    expect(upstream.refreshes - refreshes).toBe(1);
    expect(upstream.refused - refused).toBeGreaterThanOrEqual(1);
  }, TEST_MS);

  it('/account/apps lists the upstream account; Disconnect revokes it at the upstream AS (RFC 7009) and the next call elicits again', async () => {
    const page = await newPage();
    try {
      await page.goto(`${origin}/account/apps`);
      await devSignIn(page, 'bob');
      const section = page.locator('section.upstream-account', { hasText: ROUTE });
      const text = await section.innerText();
      expect(text).toContain(upstream.url);
      expect(text).toContain('files:read');
      expect(text).toMatch(/Connected\s+\d{4}-\d\d-\d\d \d\d:\d\d UTC/);
      const revocations = upstream.revocations.length;
      await section.getByRole('button', { name: 'Disconnect' }).click();
      await page.getByRole('heading', { name: 'Connected apps' }).waitFor();
      expect(await page.locator('section.upstream-account').count()).toBe(0);
      expect(upstream.revocations.slice(revocations)).toEqual(['200 refresh_token']);
    } finally {
      await page.context().close();
    }
    await elicitedLink('bob', B);
    expect(await whoami(A, 'alice')).toBe('alice-upstream');
    expect(audit.events.some((e) => e.event === 'upstream_account_disconnected' && e.sub === 'bob')).toBe(true);
  }, TEST_MS);

  it('no upstream token in the store (every key and value) or in either replica\'s logs', async () => {
    const issued = [...upstream.issuedTokens];
    expect(issued.length).toBeGreaterThan(4);
    const client = new Redis(redis.url);
    try {
      const keys = await client.keys(`${keyPrefix}*`);
      expect(keys.some((k) => k.startsWith(`${keyPrefix}upstream-grant:`))).toBe(true);
      const dump: string[] = [...keys];
      for (const key of keys) {
        const type = await client.type(key);
        if (type === 'string') dump.push((await client.get(key)) ?? '');
        else if (type === 'zset') dump.push(...(await client.zrange(key, 0, -1)));
        else if (type === 'hash') dump.push(JSON.stringify(await client.hgetall(key)));
        else dump.push(`unread type ${type}`);
      }
      const everything = dump.join('\n');
      expect(everything).not.toContain('unread type');
      for (const token of issued) expect(everything.includes(token)).toBe(false);
      for (const user of ['alice', 'bob', 'carol']) expect(keys.some((k) => k.includes(user))).toBe(false);
    } finally {
      client.disconnect();
    }
    const logs = [...A.logs, ...B.logs, ...audit.events.map((e) => JSON.stringify(e))].join('\n');
    for (const token of issued) expect(logs.includes(token)).toBe(false);
  }, TEST_MS);
});
