/**
 * `upstream_auth: { kind: user_oauth }` on one entry of an aggregated route (DESIGN §8.1, §8.2;
 * issue 22): the entry `files` is a remote MCP server of the TS SDK that wants each user's own token
 * from its own AS (a real oidc-provider), beside `everything` (server-everything, no credential).
 * The grant, connect link and callback belong to the entry (`/all/mcp#files`). A user who has not
 * connected there still initializes and is served by `everything`; lists leave `files` out for
 * them alone; a call to a `files` tool is answered with the URL elicitation (-32042), whose link
 * (opened in Chromium) connects the account; then the call carries that user's own upstream token,
 * and an upstream 401 to it renews the grant once and sends the call again.
 * Without /usr/bin/chromium the test is skipped, with the reason in its name.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateSigningKey } from '../../src/authorization-server/keys/signing-keys.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { devAuthorizationServer, gatewayYaml } from '../helpers/gateway-config.js';
import { freePort } from '../helpers/net.js';
import { codeRequestUrl, newVerifier } from '../helpers/oauth-requests.js';
import { startOAuthProtectedUpstream, type OAuthProtectedUpstream } from '../helpers/oauth-protected-upstream.js';
import { startEverythingServer, type UpstreamHandle } from '../helpers/upstream.js';
import { sleepUntil } from '../helpers/wait.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const available = existsSync(CHROMIUM);
const TEST_MS = 120_000;
const ROUTE = '/all/mcp';
const CALLBACK = 'http://127.0.0.1:1/callback';

let browser: Browser;
let upstream: OAuthProtectedUpstream;
let everything: UpstreamHandle;
let gw: TestGateway;
let origin: string;
const tokens = new Map<string, string>();

beforeAll(async () => {
  if (!available) return;
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-sync'] });
  [upstream, everything] = await Promise.all([startOAuthProtectedUpstream({ accessTokenTtl: 60 }), startEverythingServer()]);
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  gw = await startTestGateway(
    {
      'gateway.yaml': gatewayYaml({
        listen: { host: '127.0.0.1', port },
        public_url: origin,
        authorization_server: devAuthorizationServer({ signing_key: { env: 'SIGNING_KEY' } }),
        account: { enabled: true },
        account_tokens: { encryption_key: { env: 'TOKENS_KEY' } },
      }),
      'all.yaml': { path: ROUTE, upstreams: { files: { upstream: upstream.url, upstream_auth: { kind: 'user_oauth' } }, everything: { upstream: everything.url } } },
    },
    { SIGNING_KEY: JSON.stringify(await generateSigningKey()), TOKENS_KEY: randomBytes(32).toString('base64') },
    // The upstream's AS is on 127.0.0.1 (another port than the upstream): the discovery guard's test-only loopback allowance.
    { authorizationServer: { safeFetch: { allowLoopback: true } } },
  );
  for (const user of ['alice', 'bob']) tokens.set(user, await approveApp(user));
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await gw?.stop();
  await Promise.allSettled([upstream?.close(), everything?.close()]);
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

/** `user` approves a new app for the aggregated route in the browser; its access token. */
async function approveApp(user: string): Promise<string> {
  const reg = await fetch(`${origin}/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: `${user}'s assistant`, redirect_uris: [CALLBACK], token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'] }),
  });
  const clientId = ((await reg.json()) as { client_id: string }).client_id;
  const verifier = newVerifier();
  const page = await newPage();
  try {
    await page.goto(codeRequestUrl(origin, { client: { id: clientId, redirectUri: CALLBACK }, verifier, state: 's', resource: `${origin}${ROUTE}` }).href);
    await page.getByRole('button', { name: 'Approve' }).click();
    const redirected = page.waitForRequest((r) => r.url().startsWith(CALLBACK));
    await devSignIn(page, user);
    const code = new URL((await redirected).url()).searchParams.get('code')!;
    const res = await fetch(`${origin}/token`, { method: 'POST', body: new URLSearchParams({ grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: CALLBACK, client_id: clientId }) });
    return ((await res.json()) as { access_token: string }).access_token;
  } finally {
    await page.context().close();
  }
}

async function sdkClient(user: string): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(new URL(`${origin}${ROUTE}`), { requestInit: { headers: { Authorization: `Bearer ${tokens.get(user)!}` } } });
  const client = new Client({ name: 'aggregate-user-oauth', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

/** The connect link a call to `files__whoami` elicits (-32042). */
async function elicitedLink(client: Client): Promise<string> {
  const err = await client.callTool({ name: 'files__whoami', arguments: {} }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(McpError);
  expect((err as McpError).code).toBe(-32042);
  const [elicitation] = ((err as McpError).data as { elicitations: { mode: string; url: string }[] }).elicitations;
  expect(elicitation?.mode).toBe('url');
  return elicitation!.url;
}

const toolNames = async (client: Client) => (await client.listTools()).tools.map((t) => t.name);

const describeBrowser = available ? describe : describe.skip;
const why = available ? '' : ` — SKIPPED: ${CHROMIUM} is missing`;

describeBrowser(`user_oauth on one entry of an aggregated route${why}`, () => {
  it("a user without the account is served by the other upstream, gets the entry's connect link on its call, connects, and the call then carries their own token", async () => {
    const alice = await sdkClient('alice');
    const bob = await sdkClient('bob');
    // Not connected: the other upstream serves them; files is left out of their lists, for them alone.
    expect(await toolNames(alice)).toContain('everything__echo');
    expect(await toolNames(alice)).not.toContain('files__whoami');
    const link = await elicitedLink(alice);
    expect(new URL(link).origin).toBe(origin);
    expect(new URL(link).pathname).toBe('/account/connect');

    const page = await newPage();
    const visited: string[] = [];
    page.on('request', (r) => void visited.push(r.url()));
    upstream.signInAs('alice-upstream');
    try {
      await page.goto(link);
      await devSignIn(page, 'alice');
      await page.locator('h1').first().waitFor();
      expect(await page.locator('main').innerText()).toContain('Account connected');
    } finally {
      await page.context().close();
    }
    // The upstream AS sent the browser back to the entry's own callback.
    expect(visited.some((u) => u.startsWith(`${origin}/account/upstream-callback-entry/files${ROUTE}?`))).toBe(true);

    // Same session: the call now carries alice's own upstream token; the list has the entry's tools.
    const result = await alice.callTool({ name: 'files__whoami', arguments: {} });
    expect((result.content as { text: string }[])[0]!.text).toBe('alice-upstream');
    expect(upstream.seen.at(-1)!.sub).toBe('alice-upstream');
    expect(await toolNames(alice)).toEqual(expect.arrayContaining(['files__whoami', 'everything__echo']));
    // An upstream 401 to alice's stored token: one refresh, and the call sent again with the new one.
    const refuseBefore = Math.ceil(Date.now() / 1000) * 1000;
    upstream.refuseIssuedBefore.set('alice-upstream', refuseBefore);
    // The next token the upstream AS issues (same clock) has an iat of refuseBefore or later.
    await sleepUntil(refuseBefore);
    const [refreshes, refused] = [upstream.refreshes, upstream.refused];
    const again = await alice.callTool({ name: 'files__whoami', arguments: {} });
    expect((again.content as { text: string }[])[0]!.text).toBe('alice-upstream');
    expect(upstream.refreshes - refreshes).toBe(1);
    expect(upstream.refused - refused).toBeGreaterThanOrEqual(1);
    // Bob is not connected: still his own link, and everything serves him.
    expect(await toolNames(bob)).not.toContain('files__whoami');
    expect(await elicitedLink(bob)).not.toBe(link);
    expect(JSON.stringify(await bob.callTool({ name: 'everything__echo', arguments: { message: 'still here' } }))).toContain('still here');
    await Promise.all([alice.close(), bob.close()]);
  }, TEST_MS);
});
