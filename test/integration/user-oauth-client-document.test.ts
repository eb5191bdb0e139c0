/**
 * `user_oauth` without a configured client, at an upstream AS that advertises
 * `client_id_metadata_document_supported` (DESIGN §8.1): a real oidc-provider with its
 * clientIdMetadataDocument feature (draft-02) and dynamic registration both on. The gateway's
 * public URL is https (the draft requires an https client_id): it runs behind a TLS-terminating
 * proxy on loopback with a self-signed certificate; the AS reaches that public URL through its
 * `fetch`, sent on to the gateway's listener as the proxy would. The gateway must use the URL of
 * its own document as client_id (the AS fetches it and checks the redirect URI against it) and
 * never register. A second gateway, on plain http (its document could not be a client_id there),
 * falls back to dynamic registration at the same AS. Chromium for every page, the TS SDK for the call.
 * Without /usr/bin/chromium these tests are skipped, with the reason in their names.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { createServer as createHttpsServer, type Server } from 'node:https';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import fc from 'fast-check';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateSigningKey } from '../../src/authorization-server/keys/signing-keys.js';
import { upstreamCallbackPath, upstreamClientDocumentPath } from '../../src/config/reserved-paths.js';
import { selfSignedCertificate } from '../helpers/authorization-server.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { devAuthorizationServer, gatewayYaml } from '../helpers/gateway-config.js';
import { closeServer, freePort, listen } from '../helpers/net.js';
import { codeRequestUrl, newVerifier } from '../helpers/oauth-requests.js';
import { startOAuthProtectedUpstream, type OAuthProtectedUpstream } from '../helpers/oauth-protected-upstream.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const available = existsSync(CHROMIUM);
const TEST_MS = 120_000;
const ROUTE = '/files/mcp';
const CALLBACK = 'http://127.0.0.1:1/callback';

let browser: Browser;
let upstream: OAuthProtectedUpstream;
let gateway: TestGateway;
let tlsFront: Server;
/** The gateway's public https origin (the TLS front). */
let origin: string;
/** Where the AS's fetches went. */
const fetched: string[] = [];
/** Dynamic registration requests the AS received. */
let registrations = 0;

/** The TLS-terminating proxy in front of the gateway's listener on `backendPort`. */
async function startTlsFront(backendPort: number): Promise<{ server: Server; port: number }> {
  const tls = await selfSignedCertificate();
  const server = createHttpsServer({ key: tls.key, cert: tls.cert }, (req, res) => {
    const forward = httpRequest({ host: '127.0.0.1', port: backendPort, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    forward.on('error', () => res.destroy());
    req.pipe(forward);
  });
  return { server, port: await listen(server as unknown as import('node:http').Server) };
}

beforeAll(async () => {
  if (!available) return;
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--ignore-certificate-errors'] });
  const backendPort = await freePort();
  const front = await startTlsFront(backendPort);
  tlsFront = front.server;
  origin = `https://127.0.0.1:${front.port}`;
  upstream = await startOAuthProtectedUpstream({
    accessTokenTtl: 300,
    as: {
      features: { clientIdMetadataDocument: { enabled: true, ack: 'draft-02' } },
      // The AS reaches the gateway's public URL as the TLS front does: on to its listener.
      fetch: (url, options) => {
        fetched.push(url);
        const { dispatcher: _ignored, ...init } = options;
        return fetch(url.replace(origin, `http://127.0.0.1:${backendPort}`), init);
      },
    },
  });
  type KoaContext = { path: string; method: string };
  (upstream.as.provider as unknown as { use(fn: (ctx: KoaContext, next: () => Promise<void>) => Promise<void>): void }).use(async (ctx, next) => {
    if (ctx.method === 'POST' && ctx.path === '/reg') registrations++;
    await next();
  });
  gateway = await startTestGateway(
    {
      'gateway.yaml': gatewayYaml({
        listen: { host: '127.0.0.1', port: backendPort },
        public_url: origin,
        authorization_server: devAuthorizationServer({ signing_key: { env: 'SIGNING_KEY' } }),
        account: { enabled: true },
        account_tokens: { encryption_key: { env: 'TOKENS_KEY' } },
      }),
      'files.yaml': { path: ROUTE, upstream: upstream.url, upstream_auth: { kind: 'user_oauth' } },
    },
    { SIGNING_KEY: JSON.stringify(await generateSigningKey()), TOKENS_KEY: randomBytes(32).toString('base64') },
    // The upstream's AS is on 127.0.0.1 (another port than the upstream): the discovery guard's test-only loopback allowance.
    { authorizationServer: { safeFetch: { allowLoopback: true } } },
  );
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await gateway?.stop();
  if (tlsFront) await closeServer(tlsFront as unknown as import('node:http').Server);
  await upstream?.close();
});

async function devSignIn(page: Page, user: string): Promise<void> {
  await page.locator('input[name="username"]').fill(user);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

/** `user` approves a new app and, at the detour after consent, signs in at the upstream AS as `account`: the gateway access token. */
async function approveAndConnect(user: string, account: string, via = { gateway: () => gateway, origin: () => origin }): Promise<string> {
  const [gw, publicOrigin] = [via.gateway(), via.origin()];
  const reg = await fetch(`${gw.url}/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: `${user}'s assistant`, redirect_uris: [CALLBACK], token_endpoint_auth_method: 'none', grant_types: ['authorization_code'] }),
  });
  const clientId = ((await reg.json()) as { client_id: string }).client_id;
  const verifier = newVerifier();
  const page = await (await browser.newContext({ ignoreHTTPSErrors: true })).newPage();
  page.setDefaultTimeout(20_000);
  try {
    upstream.signInAs(account);
    await page.goto(codeRequestUrl(publicOrigin, { client: { id: clientId, redirectUri: CALLBACK }, verifier, state: 's', resource: `${publicOrigin}${ROUTE}` }).href);
    await page.getByRole('button', { name: 'Approve' }).click();
    const redirected = page.waitForRequest((r) => r.url().startsWith(CALLBACK));
    await devSignIn(page, user);
    const code = new URL((await redirected).url()).searchParams.get('code')!;
    const res = await fetch(`${gw.url}/token`, { method: 'POST', body: new URLSearchParams({ grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: CALLBACK, client_id: clientId }) });
    return ((await res.json()) as { access_token: string }).access_token;
  } finally {
    await page.context().close();
  }
}

async function whoami(token: string, gw = gateway): Promise<string> {
  const transport = new StreamableHTTPClientTransport(new URL(`${gw.url}${ROUTE}`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  const client = new Client({ name: 'user-oauth-cimd-test', version: '1.0.0' });
  try {
    await client.connect(transport);
    const result = await client.callTool({ name: 'whoami', arguments: {} });
    return (result.content as { text: string }[])[0]!.text;
  } finally {
    await client.close();
  }
}

const describeBrowser = available ? describe : describe.skip;
const why = available ? '' : ` — SKIPPED: ${CHROMIUM} is missing`;

describeBrowser(`user_oauth: the gateway's client ID metadata document as its client_id at oidc-provider${why}`, () => {
  it('serves the document at its public URL per route: client_id is that URL, the one redirect URI is the route\'s callback, a public client', async () => {
    const documentUrl = `${origin}${upstreamClientDocumentPath(ROUTE)}`;
    const res = await fetch(`${gateway.url}${upstreamClientDocumentPath(ROUTE)}`);
    const body = (await res.json()) as Record<string, unknown>;
    expect([res.status, body.client_id, body.redirect_uris, body.token_endpoint_auth_method, 'client_secret' in body]).toEqual([200, documentUrl, [`${origin}${upstreamCallbackPath(ROUTE)}`], 'none', false]);
  });

  it('users connect at consent with the document\'s URL as client_id, the AS fetches it, nothing is registered; each call carries the user\'s own token', async () => {
    const documentUrl = `${origin}${upstreamClientDocumentPath(ROUTE)}`;
    await fc.assert(
      fc.asyncProperty(fc.uniqueArray(fc.stringMatching(/^[a-z]{3,8}$/), { minLength: 1, maxLength: 2 }), async (names) => {
        const users = names.map((n) => `${n}-${randomBytes(3).toString('hex')}`);
        const tokens = new Map<string, string>();
        for (const user of users) tokens.set(user, await approveAndConnect(user, `${user}-upstream`));
        expect(await Promise.all(users.map((u) => whoami(tokens.get(u)!)))).toEqual(users.map((u) => `${u}-upstream`));
      }),
      { numRuns: 2 },
    );
    expect(upstream.as.authorizationRequests.length).toBeGreaterThan(0);
    for (const asked of upstream.as.authorizationRequests) expect(asked.get('client_id')).toBe(documentUrl);
    expect(fetched).toContain(documentUrl);
    expect(fetched.every((u) => u === documentUrl)).toBe(true);
    expect(registrations).toBe(0);
  }, TEST_MS * 2);

  it('a gateway whose public URL is http falls back to dynamic registration at the same AS (once), and connects', async () => {
    const plain = await startTestGateway(
      ({ port, url }) => ({
        'gateway.yaml': gatewayYaml({
          listen: { host: '127.0.0.1', port },
          public_url: url,
          authorization_server: devAuthorizationServer({ signing_key: { env: 'SIGNING_KEY' } }),
          account: { enabled: true },
          account_tokens: { encryption_key: { env: 'TOKENS_KEY' } },
        }),
        'files.yaml': { path: ROUTE, upstream: upstream.url, upstream_auth: { kind: 'user_oauth' } },
      }),
      { SIGNING_KEY: JSON.stringify(await generateSigningKey()), TOKENS_KEY: randomBytes(32).toString('base64') },
      { authorizationServer: { safeFetch: { allowLoopback: true } } },
    );
    try {
      const before = registrations;
      for (const user of ['ann', 'ben']) {
        const token = await approveAndConnect(user, `${user}-upstream`, { gateway: () => plain, origin: () => plain.url });
        expect(await whoami(token, plain)).toBe(`${user}-upstream`);
      }
      expect(registrations - before).toBe(1);
      const clientId = upstream.as.authorizationRequests.at(-1)!.get('client_id');
      expect(clientId).not.toMatch(/^https?:/);
    } finally {
      await plain.stop();
    }
  }, TEST_MS);
});
