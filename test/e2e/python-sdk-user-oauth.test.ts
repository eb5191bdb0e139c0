/**
 * The official Python SDK (mcp 2.3.0) as a client of a `user_oauth` route (DESIGN §8.1): the
 * upstream is the TS SDK's MCP server behind its own oidc-provider (test/helpers/
 * oauth-protected-upstream.ts). The user approved the app but has not connected their upstream
 * account: test/clients/python/user_oauth_client.py meets the gateway's URL elicitation, shows the
 * link (an event), the test opens it in Chromium (sign-in, the upstream AS's login), tells the
 * script the user is back, and the script's next call carries the user's own upstream token.
 * The virtualenv comes from .ci/run or is created here; without python3 or chromium this fails
 * with what to install.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateSigningKey } from '../../src/authorization-server/keys/signing-keys.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { devAuthorizationServer, gatewayYaml } from '../helpers/gateway-config.js';
import { codeRequestUrl, newVerifier } from '../helpers/oauth-requests.js';
import { startOAuthProtectedUpstream, type OAuthProtectedUpstream } from '../helpers/oauth-protected-upstream.js';
import { ensurePythonSdk, venvPython } from '../tools/python-sdk.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const script = new URL('../clients/python/user_oauth_client.py', import.meta.url).pathname;
const ROUTE = '/files/mcp';
const CALLBACK = 'http://127.0.0.1:1/callback';

let browser: Browser;
let upstream: OAuthProtectedUpstream;
let gateway: TestGateway;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (or set CHROMIUM_PATH)`);
  ensurePythonSdk();
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'] });
  upstream = await startOAuthProtectedUpstream({ accessTokenTtl: 300 });
  gateway = await startTestGateway(
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
    // The upstream's AS is on 127.0.0.1 (another port than the upstream): the discovery guard's test-only loopback allowance.
    { authorizationServer: { safeFetch: { allowLoopback: true } } },
  );
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await gateway?.stop();
  await upstream?.close();
});

async function devSignIn(page: Page, user: string): Promise<void> {
  await page.locator('input[name="username"]').fill(user);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

/** `user` approves an app and declines at the upstream AS's detour: the gateway access token, no upstream grant. */
async function approveApp(user: string): Promise<string> {
  const reg = await fetch(`${gateway.url}/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: 'Python SDK client', redirect_uris: [CALLBACK], token_endpoint_auth_method: 'none', grant_types: ['authorization_code'] }),
  });
  const clientId = ((await reg.json()) as { client_id: string }).client_id;
  const verifier = newVerifier();
  const page = await (await browser.newContext()).newPage();
  page.setDefaultTimeout(20_000);
  try {
    upstream.signInAs(undefined);
    await page.goto(codeRequestUrl(gateway.url, { client: { id: clientId, redirectUri: CALLBACK }, verifier, state: 's', resource: `${gateway.url}${ROUTE}` }).href);
    await page.getByRole('button', { name: 'Approve' }).click();
    const redirected = page.waitForRequest((r) => r.url().startsWith(CALLBACK));
    await devSignIn(page, user);
    const code = new URL((await redirected).url()).searchParams.get('code')!;
    const res = await fetch(`${gateway.url}/token`, { method: 'POST', body: new URLSearchParams({ grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: CALLBACK, client_id: clientId }) });
    return ((await res.json()) as { access_token: string }).access_token;
  } finally {
    await page.context().close();
  }
}

type Event = Record<string, unknown> & { event: string };

/** The script's events as they come; `next` waits for one (30 s), with the transcript on failure. */
function runScript(token: string): { child: ChildProcess; next(): Promise<Event>; transcript: string[] } {
  const child = spawn(venvPython, ['-u', script, `${gateway.url}${ROUTE}`, token], { stdio: ['pipe', 'pipe', 'pipe'] });
  const transcript: string[] = [];
  const queue: Event[] = [];
  const waiting: ((e: Event) => void)[] = [];
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => transcript.push(`stderr: ${chunk}`));
  createInterface({ input: child.stdout! }).on('line', (line) => {
    transcript.push(line);
    const event = JSON.parse(line) as Event;
    const waiter = waiting.shift();
    if (waiter) waiter(event);
    else queue.push(event);
  });
  const next = () =>
    queue.length > 0
      ? Promise.resolve(queue.shift()!)
      : new Promise<Event>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error(`no event from the Python client:\n${transcript.join('\n')}`)), 30_000);
          waiting.push((e) => {
            clearTimeout(timer);
            resolve(e);
          });
        });
  return { child, next, transcript };
}

describe('the Python SDK on a user_oauth route: connect through the elicitation link, then call', () => {
  it('meets the URL elicitation, the link (opened in Chromium) connects the user\'s account, and the next call answers with that account', async () => {
    const user = `pia-${randomBytes(3).toString('hex')}`;
    const token = await approveApp(user);
    const run = runScript(token);
    try {
      let event = await run.next();
      while (event.event === 'connected') event = await run.next();
      // The SDK negotiates 2025-11-25: the gateway's initialize answer is error -32042 naming the link.
      expect([event.event, event.via, event.code], run.transcript.join('\n')).toEqual(['elicitation', 'error', -32042]);
      const link = (event.urls as string[])[0]!;
      expect(new URL(link).origin).toBe(gateway.url);
      const page = await (await browser.newContext()).newPage();
      page.setDefaultTimeout(20_000);
      upstream.signInAs(`${user}-upstream`);
      try {
        await page.goto(link);
        await devSignIn(page, user);
        await page.locator('h1').first().waitFor();
        expect(await page.locator('main').innerText()).toContain('Account connected');
      } finally {
        await page.context().close();
      }
      run.child.stdin!.write('\n');
      const after: Event[] = [];
      for (let e = await run.next(); ; e = await run.next()) {
        after.push(e);
        if (['done', 'crashed', 'gave_up'].includes(e.event)) break;
      }
      expect(after.find((e) => e.event === 'connected')).toMatchObject({ protocol_version: '2025-11-25' });
      expect(after.find((e) => e.event === 'called'), run.transcript.join('\n')).toMatchObject({ is_error: false, text: [`${user}-upstream`] });
      expect(after.at(-1)!.event).toBe('done');
      expect(upstream.seen.filter((s) => s.sub === `${user}-upstream`).length).toBeGreaterThan(0);
    } finally {
      run.child.kill();
    }
  }, 120_000);
});
