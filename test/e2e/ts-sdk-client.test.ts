/**
 * The MCP TypeScript SDK (@modelcontextprotocol/sdk 1.32.2, and its 2.x client
 * @modelcontextprotocol/client 2.4), unmodified, as an application uses it:
 * its own `auth()` and `StreamableHTTPClientTransport`, an `OAuthClientProvider` that opens the
 * authorization URL in a browser (Chromium here) and a loopback callback server (RFC 8252) that
 * receives the code, then `transport.finishAuth(code)` — through the demo and through a route of a
 * test gateway (client-targets.ts), with nothing registered ahead.
 *
 * Full flow: discovery, registration with the first challenge's scope (mcp:read), consent and login
 * in Chromium, tools/list and tools/call. Step-up: add_note needs mcp:write; the SDK meets 403
 * insufficient_scope and runs `auth()` with the challenge's scope. What it does next depends on
 * whether it holds a refresh token:
 * - registered for `authorization_code` only, it opens a new authorization for mcp:read mcp:write
 *   with the client it registered for mcp:read; the consent page names mcp:write; the app finishes
 *   it and the call succeeds (DESIGN §8.3);
 * - registered for `refresh_token` too (what most apps do), SDK 1.32 refreshes instead — a refresh
 *   cannot widen a grant (RFC 6749 §6) and the SDK sends no scope with it — meets the same 403 and
 *   gives up with "Server returned 403 after trying upscoping", without opening a browser. That is
 *   the SDK's own limit, asserted as it happens. The SDK's 2.x client (`@modelcontextprotocol/client`
 *   2.4, which mcp-remote bundles) re-authorizes when the challenge asks for more than the token
 *   holds, refresh token or not: the last test runs it the same way.
 * Denial: `shell` is denied by policy: 403 without a challenge, whose JSON-RPC body the SDK puts in
 * the call's error ("denied by policy"), and no authorization starts (DESIGN §8.4).
 */
import { createServer, type Server } from 'node:http';
import { randomBytes } from 'node:crypto';
import type { Browser, BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import * as sdk2 from '@modelcontextprotocol/client';
import { launchChromium, startDemoTarget, startRouteTarget, userAuthorizes, type ClientTarget, type UserVisit } from '../helpers/client-targets.js';
import { closeServer, listen } from '../helpers/net.js';

let browser: Browser;
const targets: Partial<Record<ClientTarget['name'], ClientTarget>> = {};

beforeAll(async () => {
  const [demo, route, chromium] = await Promise.all([startDemoTarget(), startRouteTarget(), launchChromium()]);
  Object.assign(targets, { demo, route });
  browser = chromium;
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await Promise.all(Object.values(targets).map((t) => t.stop()));
});

/** The application: its OAuthClientProvider, its loopback callback server, and the user it sends to Chromium. */
class BrowserApp implements OAuthClientProvider {
  readonly authorizationUrls: URL[] = [];
  readonly visits: UserVisit[] = [];
  private client?: OAuthClientInformationMixed;
  private saved?: OAuthTokens;
  private verifier?: string;
  private expectedState?: string;
  private pendingCode?: (code: string) => void;
  private code?: Promise<string>;
  /** RFC 9207 `iss` of the last authorization response (the 2.x client checks it). */
  iss?: string;

  private constructor(
    private readonly server: Server,
    readonly redirectUrl: string,
    private readonly grantTypes: string[],
    private readonly context: BrowserContext,
    private readonly username: string,
  ) {}

  static async start(context: BrowserContext, username: string, grantTypes: string[]): Promise<BrowserApp> {
    const started: { app?: BrowserApp } = {};
    const server = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://127.0.0.1');
      res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><p>Signed in. You can close this window.</p>');
      if (url.pathname === '/callback') started.app?.received(url);
    });
    const port = await listen(server);
    started.app = new BrowserApp(server, `http://127.0.0.1:${port}/callback`, grantTypes, context, username);
    return started.app;
  }

  get clientMetadata(): OAuthClientMetadata {
    return { client_name: 'TS SDK test app', redirect_uris: [this.redirectUrl], grant_types: this.grantTypes, response_types: ['code'], token_endpoint_auth_method: 'none' };
  }
  state() {
    return (this.expectedState = randomBytes(16).toString('base64url'));
  }
  clientInformation() {
    return this.client;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.client = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    if (!this.verifier) throw new Error('no PKCE code verifier saved');
    return this.verifier;
  }

  /** Opens the URL in the browser, as an app does; the user there approves and signs in. */
  async redirectToAuthorization(url: URL): Promise<void> {
    this.authorizationUrls.push(url);
    this.code = new Promise((resolve) => (this.pendingCode = resolve));
    const page = await this.context.newPage();
    page.setDefaultTimeout(10_000);
    this.visits.push(await userAuthorizes(page, url.href, this.username));
    await page.close();
  }

  private received(url: URL): void {
    if (url.searchParams.get('state') !== this.expectedState) return;
    const code = url.searchParams.get('code');
    this.iss = url.searchParams.get('iss') ?? undefined;
    if (code) this.pendingCode?.(code);
  }

  /** The code the browser brought back to the callback. */
  async takeCode(): Promise<string> {
    if (!this.code) throw new Error('no authorization was started');
    const code = await this.code;
    this.code = undefined;
    return code;
  }

  close(): Promise<void> {
    return closeServer(this.server);
  }
}

/** A `fetch` that keeps every token request's form and answer: what the SDK sends the AS. */
function tokenRecorder(): { fetch: typeof fetch; exchanges: Array<{ form: URLSearchParams; answer: Record<string, unknown> }> } {
  const exchanges: Array<{ form: URLSearchParams; answer: Record<string, unknown> }> = [];
  const recording: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    if (new URL(input instanceof Request ? input.url : String(input)).pathname === '/token') {
      exchanges.push({ form: new URLSearchParams(String(init?.body)), answer: (await res.clone().json()) as Record<string, unknown> });
    }
    return res;
  };
  return { fetch: recording, exchanges };
}

async function connect(mcpUrl: string, app: BrowserApp, fetchFn?: typeof fetch): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const url = new URL(mcpUrl);
  let transport = new StreamableHTTPClientTransport(url, { authProvider: app, fetch: fetchFn });
  let client = new Client({ name: 'ts-sdk-test-app', version: '1.0.0' });
  await expect(client.connect(transport)).rejects.toThrow(UnauthorizedError);
  await transport.finishAuth(await app.takeCode());
  await client.close();
  transport = new StreamableHTTPClientTransport(url, { authProvider: app, fetch: fetchFn });
  client = new Client({ name: 'ts-sdk-test-app', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

const scopesOf = (url: URL) => url.searchParams.get('scope')?.split(' ').sort();

describe.each(['demo', 'route'] as const)('the MCP TypeScript SDK 1.32 through the %s, browser steps in Chromium', (name) => {
  it('registers itself with mcp:read, consent and login, tools; step-up opens a new consent naming mcp:write with the same client; a denial reads as one and starts no authorization', async () => {
    const context = await browser.newContext();
    const app = await BrowserApp.start(context, 'ts-alice', ['authorization_code']);
    try {
      const { client, transport } = await connect(targets[name]!.mcpUrl, app);
      const [first] = app.authorizationUrls;
      expect(scopesOf(first!)).toEqual(['mcp:read']);
      expect(app.clientInformation()).toMatchObject({ scope: 'mcp:read' });
      expect(app.visits[0]!.consent).toContain('TS SDK test app');
      expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual(['add', 'echo', 'list_notes']);
      expect(await client.callTool({ name: 'add', arguments: { a: 2, b: 3 } })).toMatchObject({ content: [{ type: 'text', text: '5' }] });

      // Step-up: a new authorization for the wider scope, the app finishes it, the call succeeds.
      await expect(client.callTool({ name: 'add_note', arguments: { text: 'from ts' } })).rejects.toThrow(UnauthorizedError);
      const stepUp = app.authorizationUrls[1]!;
      expect(scopesOf(stepUp)).toEqual(['mcp:read', 'mcp:write']);
      expect(stepUp.searchParams.get('client_id')).toBe(first!.searchParams.get('client_id'));
      expect(app.visits[1]!.error).toBeUndefined();
      expect(app.visits[1]!.consent).toContain('mcp:write');
      await transport.finishAuth(await app.takeCode());
      expect(app.tokens()!.scope?.split(' ').sort()).toEqual(['mcp:read', 'mcp:write']);
      expect(await client.callTool({ name: 'add_note', arguments: { text: 'from ts' } })).toMatchObject({ content: [{ type: 'text', text: expect.stringMatching(/^added note \d+$/) as unknown }] });

      // Denied by policy: the 403's JSON-RPC body is in the error; no authorization starts.
      const denial = await client.callTool({ name: 'shell', arguments: { command: 'id' } }).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(denial).toBeInstanceOf(StreamableHTTPError);
      expect((denial as StreamableHTTPError).code).toBe(403);
      expect((denial as Error).message).toMatch(/denied by policy: the tool 'shell' is not allowed/);
      expect(app.authorizationUrls).toHaveLength(2);
      expect(await client.callTool({ name: 'echo', arguments: { message: 'still here' } })).toMatchObject({ content: [{ text: 'still here' }] });
      await client.close();
    } finally {
      await app.close();
      await context.close();
    }
  }, 60_000);

  it('registered for refresh_token too, SDK 1.32 refreshes on 403 insufficient_scope (no scope can be widened so) and gives up without opening a browser: its limit, recorded', async () => {
    const context = await browser.newContext();
    const app = await BrowserApp.start(context, 'ts-bob', ['authorization_code', 'refresh_token']);
    try {
      const recorder = tokenRecorder();
      const { client } = await connect(targets[name]!.mcpUrl, app, recorder.fetch);
      expect(app.tokens()!.refresh_token).toBeTruthy();
      const before = recorder.exchanges.length;
      await expect(client.callTool({ name: 'add_note', arguments: { text: 'from ts' } })).rejects.toThrow('Server returned 403 after trying upscoping');
      expect(app.authorizationUrls).toHaveLength(1);
      // What the SDK did on the 403 (its auth() takes the refresh branch whenever it holds a refresh
      // token, typescript-sdk#2255): one refresh, with no scope — the AS cannot tell it is a step-up —
      // answered as RFC 6749 §6 says, with the grant's own scope; the retry met the same challenge.
      const refreshes = recorder.exchanges.slice(before);
      expect(refreshes.map((e) => e.form.get('grant_type'))).toEqual(['refresh_token']);
      expect(refreshes[0]!.form.has('scope')).toBe(false);
      expect(refreshes[0]!.answer.scope).toBe('mcp:read');
      expect(app.tokens()!.scope).toBe('mcp:read');
      await client.close();
    } finally {
      await app.close();
      await context.close();
    }
  }, 60_000);
});

describe.each(['demo', 'route'] as const)('the MCP TypeScript SDK 2.4 client (@modelcontextprotocol/client) through the %s, browser steps in Chromium', (name) => {
  it('registered for refresh_token too, as most apps: step-up opens a new consent naming mcp:write with the same client, the call succeeds; a denial reads as one', async () => {
    const context = await browser.newContext();
    const app = await BrowserApp.start(context, 'ts2-carol', ['authorization_code', 'refresh_token']);
    const url = new URL(targets[name]!.mcpUrl);
    try {
      let transport = new sdk2.StreamableHTTPClientTransport(url, { authProvider: app });
      let client = new sdk2.Client({ name: 'ts-sdk-2-test-app', version: '1.0.0' });
      await expect(client.connect(transport)).rejects.toThrow(sdk2.UnauthorizedError);
      await transport.finishAuth(await app.takeCode(), app.iss);
      await client.close();
      transport = new sdk2.StreamableHTTPClientTransport(url, { authProvider: app });
      client = new sdk2.Client({ name: 'ts-sdk-2-test-app', version: '1.0.0' });
      await client.connect(transport);
      expect(app.tokens()!.refresh_token).toBeTruthy();
      expect(app.clientInformation()).toMatchObject({ scope: 'mcp:read' });
      expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual(['add', 'echo', 'list_notes']);

      await expect(client.callTool({ name: 'add_note', arguments: { text: 'from ts 2' } })).rejects.toThrow(sdk2.UnauthorizedError);
      const stepUp = app.authorizationUrls[1]!;
      expect(scopesOf(stepUp)).toEqual(['mcp:read', 'mcp:write']);
      expect(stepUp.searchParams.get('client_id')).toBe(app.authorizationUrls[0]!.searchParams.get('client_id'));
      expect(app.visits[1]!.consent).toContain('mcp:write');
      await transport.finishAuth(await app.takeCode(), app.iss);
      expect(app.tokens()!.scope?.split(' ').sort()).toEqual(['mcp:read', 'mcp:write']);
      expect(await client.callTool({ name: 'add_note', arguments: { text: 'from ts 2' } })).toMatchObject({ content: [{ type: 'text', text: expect.stringMatching(/^added note \d+$/) as unknown }] });

      const denial = await client.callTool({ name: 'shell', arguments: { command: 'id' } }).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(denial).toBeInstanceOf(sdk2.SdkHttpError);
      expect((denial as Error).message).toMatch(/denied by policy: the tool 'shell' is not allowed/);
      expect(app.authorizationUrls).toHaveLength(2);
      await client.close();
    } finally {
      await app.close();
      await context.close();
    }
  }, 60_000);
});
