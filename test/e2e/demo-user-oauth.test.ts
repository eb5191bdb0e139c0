/**
 * `upstream_auth: { kind: user_oauth }` as a user of the demo meets it (issue 21): `mcp-auth-gateway
 * demo` (the CLI, a separate process, its embedded configuration) serves `/remote/mcp` in front of
 * a server that wants each user's own account at its own authorization server (src/demo/
 * demo-remote-service.ts, on localhost only). An application of the MCP TypeScript SDK (its own
 * `auth()`, an OAuthClientProvider, a loopback callback) connects; the user walks every page in
 * Chromium: the gateway's consent page (which says the app acts with the user's own account
 * there), the dev login, then that server's AS (its consent, its login), then back to the app.
 * - connect at consent: `whoami` answers the account at the remote service, not the gateway's user;
 * - declined at the remote service: the app still works, the call gets a URL elicitation (-32042)
 *   whose link, opened in Chromium, connects; the call then works;
 * - /account/apps lists the account; Disconnect ends it and the next call elicits again;
 * - the README's recipe is the route the demo runs.
 */
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { DEMO_REMOTE_ROUTE_PATH, demoConfigFiles } from '../../src/demo/demo.js';
import { launchChromium } from '../helpers/client-targets.js';
import { startDemo, type DemoProcess } from '../helpers/demo-process.js';
import { closeServer, listen } from '../helpers/net.js';

const TEST_MS = 90_000;
let demo: DemoProcess;
let browser: Browser;
let remoteUrl: string;
let origin: string;

beforeAll(async () => {
  [demo, browser] = await Promise.all([startDemo(), launchChromium()]);
  remoteUrl = /Your own account at a remote server:\s+(\S+)/.exec(demo.stdout())![1]!;
  origin = new URL(remoteUrl).origin;
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await demo?.stop();
});

/** Who signs in where: at the gateway's dev login, and at the remote service's. */
interface Person {
  gateway: string;
  remote: string;
  /** Deny at the remote service's consent page. */
  declineRemote?: boolean;
}

/**
 * The user in Chromium from `start` until `done`: approves (or, at the remote service, maybe
 * declines) each consent page and signs in at each login; the consent pages' texts by host.
 */
async function walk(page: Page, start: string, person: Person, done: (page: Page) => Promise<boolean>): Promise<string[]> {
  const consents: string[] = [];
  await page.goto(start);
  for (let step = 0; step < 12; step++) {
    await page.waitForLoadState('load');
    if (await done(page)) return consents;
    const remote = new URL(page.url()).hostname === 'localhost';
    const approve = page.locator('button[value="approve"]');
    const login = page.locator('input[name="username"]');
    if ((await approve.count()) > 0) {
      consents.push(`${new URL(page.url()).host} ${await page.locator('main').innerText()}`);
      const button = remote && person.declineRemote ? page.locator('button[value="deny"]') : approve;
      await Promise.all([page.waitForNavigation(), button.click()]);
    } else if ((await login.count()) > 0) {
      await login.fill(remote ? person.remote : person.gateway);
      await Promise.all([page.waitForNavigation(), login.press('Enter')]);
    } else throw new Error(`unexpected page ${page.url()}: ${await page.locator('body').innerText()}`);
  }
  throw new Error('too many pages');
}

/** The application: the SDK's OAuthClientProvider, with a loopback callback (RFC 8252). */
class App implements OAuthClientProvider {
  readonly consents: string[] = [];
  private info?: OAuthClientInformationMixed;
  private saved?: OAuthTokens;
  private verifier?: string;
  private code?: string;

  private constructor(
    private readonly server: Server,
    readonly redirectUrl: string,
    private readonly context: BrowserContext,
    private readonly person: Person,
  ) {}

  static async start(context: BrowserContext, person: Person): Promise<App> {
    const server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><h1>Signed in</h1>'));
    return new App(server, `http://127.0.0.1:${await listen(server)}/callback`, context, person);
  }

  get clientMetadata(): OAuthClientMetadata {
    return { client_name: 'Demo user_oauth app', redirect_uris: [this.redirectUrl], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' };
  }
  state = () => randomBytes(16).toString('base64url');
  clientInformation = () => this.info;
  saveClientInformation = (info: OAuthClientInformationMixed) => void (this.info = info);
  tokens = () => this.saved;
  saveTokens = (tokens: OAuthTokens) => void (this.saved = tokens);
  saveCodeVerifier = (verifier: string) => void (this.verifier = verifier);
  codeVerifier = () => this.verifier!;

  /** The browser walks every page until it is back at the app's callback. */
  async redirectToAuthorization(url: URL): Promise<void> {
    const page = await this.context.newPage();
    page.setDefaultTimeout(20_000);
    try {
      this.consents.push(...(await walk(page, url.href, this.person, async (p) => p.url().startsWith(this.redirectUrl))));
      this.code = new URL(page.url()).searchParams.get('code') ?? undefined;
    } finally {
      await page.close();
    }
  }

  takeCode(): string {
    if (!this.code) throw new Error('the browser brought no code back');
    return this.code;
  }

  close = () => closeServer(this.server);
}

/** The app connects: 401, the SDK's auth() opens the browser, the user walks it, the app finishes with the code. */
async function connect(app: App): Promise<void> {
  const transport = new StreamableHTTPClientTransport(new URL(remoteUrl), { authProvider: app });
  const client = new Client({ name: 'demo-user-oauth-app', version: '1.0.0' });
  await expect(client.connect(transport)).rejects.toThrow(UnauthorizedError);
  await transport.finishAuth(app.takeCode());
  await client.close().catch(() => undefined);
}

/** One call of `whoami` with the app's token: its text, or the McpError the gateway answered. */
async function whoami(app: App): Promise<string | McpError> {
  const client = new Client({ name: 'demo-user-oauth-app', version: '1.0.0' });
  try {
    await client.connect(new StreamableHTTPClientTransport(new URL(remoteUrl), { authProvider: app }));
    const result = await client.callTool({ name: 'whoami', arguments: {} });
    return (result.content as { text: string }[])[0]!.text;
  } catch (err) {
    if (err instanceof McpError) return err;
    throw err;
  } finally {
    await client.close().catch(() => undefined);
  }
}

function elicitedUrl(answer: string | McpError): string {
  expect(answer).toBeInstanceOf(McpError);
  expect((answer as McpError).code).toBe(-32042);
  const [elicitation] = ((answer as McpError).data as { elicitations: { mode: string; url: string }[] }).elicitations;
  expect(elicitation?.mode).toBe('url');
  expect(new URL(elicitation!.url).origin).toBe(origin);
  return elicitation!.url;
}

const heading = (text: string) => async (page: Page) => (await page.locator('h1', { hasText: text }).count()) > 0;

describe('the demo: a remote server that wants each user\'s own account (user_oauth), the TS SDK and Chromium', () => {
  it('connects at consent: the consent page says so, the browser visits the remote service\'s AS once, whoami answers the account there', async () => {
    const context = await browser.newContext();
    const app = await App.start(context, { gateway: 'ann', remote: 'ann-at-remote' });
    try {
      await connect(app);
      const [gatewayConsent, remoteConsent, ...more] = app.consents;
      expect(gatewayConsent).toContain('Demo user_oauth app');
      expect(gatewayConsent).toContain('your own account at');
      // The remote service's AS asked the user about the gateway, the client it registered itself as.
      expect(remoteConsent).toMatch(/^localhost:\d+ /);
      expect(more).toEqual([]);
      expect(await whoami(app)).toBe('ann-at-remote');
    } finally {
      await app.close();
      await context.close();
    }
  }, TEST_MS);

  it('declined at the remote service: the app works, the call elicits the connect page (-32042); the link connects; /account/apps lists the account and Disconnect ends it', async () => {
    const context = await browser.newContext();
    const person = { gateway: 'ben', remote: 'ben-at-remote', declineRemote: true };
    const app = await App.start(context, person);
    try {
      await connect(app);
      const link = elicitedUrl(await whoami(app));
      const page = await context.newPage();
      page.setDefaultTimeout(20_000);
      person.declineRemote = false;
      await walk(page, link, person, heading('Account connected'));
      expect(await whoami(app)).toBe('ben-at-remote');

      await walk(page, `${origin}/account/apps`, person, heading('Connected apps'));
      const section = page.locator('section.upstream-account', { hasText: DEMO_REMOTE_ROUTE_PATH });
      expect(await section.innerText()).toContain('remote:read');
      await section.getByRole('button', { name: 'Disconnect' }).click();
      await page.getByRole('heading', { name: 'Connected apps' }).waitFor();
      expect(await page.locator('section.upstream-account').count()).toBe(0);
      elicitedUrl(await whoami(app));
    } finally {
      await app.close();
      await context.close();
    }
  }, TEST_MS);

  it("the README's recipe for such a server is the route the demo runs", async () => {
    const readme = await readFile(new URL('../../README.md', import.meta.url), 'utf8');
    const block = /^```yaml\n(# mcp\/gateway\.yaml — a server that wants each user's own account[\s\S]*?)^```/m.exec(readme)?.[1];
    expect(block, 'the README has the user_oauth recipe').toBeDefined();
    const config = parse(block!) as { routes: Record<string, unknown>[]; account: unknown; account_tokens: unknown };
    const { remoteRoute, gateway } = demoConfigFiles(8080, 'http://127.0.0.1:3000/mcp', false, 'http://localhost:3001/mcp');
    expect(config.routes).toEqual([remoteRoute]);
    expect(config.account).toEqual(gateway.account);
    expect(config.account_tokens).toMatchObject({ encryption_key: { env: expect.any(String) as unknown } });
  });
});
