/**
 * `user_oauth` against an upstream AS without metadata, as GitHub's (DESIGN §8.1): the local
 * stand-in of test/helpers/github-like-upstream.ts (explicit endpoints, a confidential client,
 * form-encoded token answers unless `Accept: application/json`, no refresh token, no `iss`) in
 * front of an SDK MCP server that wants its tokens. The route is configured with
 * `authorization_endpoint`, `token_endpoint`, `client_id`, `client_secret` and `send_resource: false`.
 * Users connect through the URL elicitation's link in Chromium; calls come from the TS SDK.
 * Without /usr/bin/chromium these tests are skipped, with the reason in their names.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import fc from 'fast-check';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateSigningKey } from '../../src/authorization-server/keys/signing-keys.js';
import { upstreamCallbackPath } from '../../src/config/reserved-paths.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { devAuthorizationServer, gatewayYaml } from '../helpers/gateway-config.js';
import { startGithubLikeUpstream, type GithubLikeUpstream } from '../helpers/github-like-upstream.js';
import { freePort } from '../helpers/net.js';
import { codeRequestUrl, newVerifier } from '../helpers/oauth-requests.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const available = existsSync(CHROMIUM);
const TEST_MS = 120_000;
const ROUTE = '/github/mcp';
const CALLBACK = 'http://127.0.0.1:1/callback';

let browser: Browser;
let upstream: GithubLikeUpstream;
let gateway: TestGateway;
let origin: string;
const tokens = new Map<string, string>();

beforeAll(async () => {
  if (!available) return;
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-sync'] });
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  upstream = await startGithubLikeUpstream(`${origin}${upstreamCallbackPath(ROUTE)}`);
  const env = { SIGNING_KEY: JSON.stringify(await generateSigningKey()), TOKENS_KEY: randomBytes(32).toString('base64'), GITHUB_SECRET: upstream.client.secret };
  gateway = await startTestGateway(
    {
      'gateway.yaml': gatewayYaml({
        listen: { host: '127.0.0.1', port },
        public_url: origin,
        authorization_server: devAuthorizationServer({ signing_key: { env: 'SIGNING_KEY' } }),
        account: { enabled: true },
        account_tokens: { encryption_key: { env: 'TOKENS_KEY' } },
      }),
      'github.yaml': {
        path: ROUTE,
        upstream: upstream.url,
        upstream_auth: {
          kind: 'user_oauth',
          authorization_endpoint: upstream.authorizationEndpoint,
          token_endpoint: upstream.tokenEndpoint,
          client_id: upstream.client.id,
          client_secret: { env: 'GITHUB_SECRET' },
          scopes: ['repo'],
          send_resource: false,
        },
      },
    },
    env,
  );
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await gateway?.stop();
  await upstream?.close();
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

/** `user` approves a new app and declines at the upstream AS's detour after consent: the gateway access token. */
async function approveApp(user: string): Promise<string> {
  const reg = await fetch(`${origin}/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: `${user}'s assistant`, redirect_uris: [CALLBACK], token_endpoint_auth_method: 'none', grant_types: ['authorization_code'] }),
  });
  const clientId = ((await reg.json()) as { client_id: string }).client_id;
  const verifier = newVerifier();
  const page = await newPage();
  try {
    upstream.signInAs(undefined);
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

/** `user`'s SDK session: whoami's answer, or the connect link of the -32042 elicitation. */
async function call(user: string): Promise<{ whoami: string } | { link: string }> {
  const transport = new StreamableHTTPClientTransport(new URL(`${gateway.url}${ROUTE}`), { requestInit: { headers: { Authorization: `Bearer ${tokens.get(user)!}` } } });
  const client = new Client({ name: 'user-oauth-github-test', version: '1.0.0' });
  try {
    await client.connect(transport);
    const result = await client.callTool({ name: 'whoami', arguments: {} });
    return { whoami: (result.content as { text: string }[])[0]!.text };
  } catch (err) {
    expect(err).toBeInstanceOf(McpError);
    expect((err as McpError).code).toBe(-32042);
    return { link: ((err as McpError).data as { elicitations: { url: string }[] }).elicitations[0]!.url };
  } finally {
    await client.close();
  }
}

/** `user` opens the elicited link, signs in, and is signed in at the upstream as `account`: the final page's text. */
async function connect(user: string, account: string): Promise<string> {
  const answer = await call(user);
  if (!('link' in answer)) throw new Error(`${user} is connected already`);
  const page = await newPage();
  upstream.signInAs(account);
  try {
    await page.goto(answer.link);
    await devSignIn(page, user);
    await page.locator('h1').first().waitFor();
    return await page.locator('main').innerText();
  } finally {
    await page.context().close();
  }
}

const describeBrowser = available ? describe : describe.skip;
const why = available ? '' : ` — SKIPPED: ${CHROMIUM} is missing`;

describeBrowser(`user_oauth with an OAuth-only upstream AS (the GitHub stand-in)${why}`, () => {
  it('the stand-in answers its token endpoint form-encoded unless asked for JSON, with status 200 even for an error (as GitHub)', async () => {
    const res = await fetch(upstream.tokenEndpoint, { method: 'POST', body: new URLSearchParams({ client_id: upstream.client.id, client_secret: upstream.client.secret, code: 'nope' }) });
    expect([res.status, res.headers.get('content-type')?.split(';')[0], await res.text()]).toEqual([200, 'application/x-www-form-urlencoded', 'error=bad_verification_code']);
  });

  it('connects each user through the elicitation with the explicit endpoints and client_secret, no `resource` sent; each call carries the user\'s own token', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uniqueArray(fc.stringMatching(/^[a-z]{3,8}$/), { minLength: 1, maxLength: 3 }), async (names) => {
        const users = names.map((n) => `${n}-${randomBytes(3).toString('hex')}`);
        for (const user of users) {
          tokens.set(user, await approveApp(user));
          expect(await connect(user, `${user}-gh`)).toContain('Account connected');
        }
        const answers = await Promise.all([...users, ...users].map((u) => call(u)));
        expect(answers).toEqual([...users, ...users].map((u) => ({ whoami: `${u}-gh` })));
      }),
      { numRuns: 2 },
    );
    const asked = upstream.authorizationRequests.at(-1)!;
    expect([asked.get('client_id'), asked.get('scope'), asked.get('code_challenge_method'), asked.has('resource')]).toEqual([upstream.client.id, 'repo', 'S256', false]);
    const redeemed = upstream.tokenRequests.filter((t) => t.form.get('grant_type') === 'authorization_code' && !t.error);
    expect(redeemed.length).toBeGreaterThan(0);
    for (const t of redeemed) {
      expect(t.answeredAs).toBe('json');
      expect(t.basicAuth || t.form.get('client_secret') === upstream.client.secret).toBe(true);
      expect(t.form.has('resource')).toBe(false);
    }
  }, TEST_MS * 2);

  it('a token the upstream no longer accepts and no refresh token: the grant is dropped and the next call elicits a new link', async () => {
    const user = `erin-${randomBytes(3).toString('hex')}`;
    tokens.set(user, await approveApp(user));
    expect(await connect(user, 'erin-gh')).toContain('Account connected');
    expect(await call(user)).toEqual({ whoami: 'erin-gh' });
    upstream.revokeAll('erin-gh');
    const refreshes = upstream.tokenRequests.filter((t) => t.form.get('grant_type') === 'refresh_token').length;
    const after = await call(user);
    expect('link' in after && new URL(after.link).origin).toBe(origin);
    // Nothing to refresh with: the gateway did not ask the token endpoint.
    expect(upstream.tokenRequests.filter((t) => t.form.get('grant_type') === 'refresh_token').length).toBe(refreshes);
    expect(await connect(user, 'erin-gh')).toContain('Account connected');
    expect(await call(user)).toEqual({ whoami: 'erin-gh' });
  }, TEST_MS);
});
