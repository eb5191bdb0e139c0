/**
 * `mcp-remote` (npm, the stdio bridge desktop apps use to reach remote servers), unmodified, through
 * the demo and through a route of a test gateway (client-targets.ts). The test is the desktop app:
 * it starts `mcp-remote <url> <callback port> --host 127.0.0.1` and speaks MCP to it over stdio
 * (the TS SDK's stdio client); mcp-remote does all the OAuth itself — discovery, registration,
 * PKCE, its loopback callback server, tokens under MCP_REMOTE_CONFIG_DIR (a fresh directory). It
 * prints the authorization URL on stderr and tries to open a browser (BROWSER is a no-op here); the
 * user in Chromium opens that URL, approves the consent page and signs in.
 *
 * Full flow: tools/list and tools/call with mcp:read. Denial: `shell`'s 403 (no challenge) reaches
 * the app as the call's error naming "denied by policy" (mcp-remote relays the JSON-RPC body's
 * text), and mcp-remote starts no authorization.
 *
 * Step-up: on add_note's 403 insufficient_scope the SDK inside mcp-remote authorizes again
 * mid-session, with the client it registered for mcp:read, asking for the union of its token's scope
 * and the challenge's ("mcp:read mcp:write"), and retries the call; the consent page names mcp:write
 * and the call succeeds, through both targets. Every authorization URL passes mcp-remote 0.15.1's
 * applyScope (dist/chunk-KJCT2FXL.js:35320-35336), which keeps a scope only if it differs, as a
 * string, from the first 401's scope and from the protected resource's scopes_supported joined
 * (:35324-35325); a step-up scope that spelled scopes_supported would be put back to mcp:read (its
 * bug, pinned in test/unit/mcp-remote-apply-scope.test.ts, docs/clients.md). Neither target meets it:
 * the demo advertises the minimal set MCP asks for (mcp:read; mcp:write comes by step-up), the test
 * route lists a third scope.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import type { Browser, BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { launchChromium, startDemoTarget, startRouteTarget, userAuthorizes, type ClientTarget, type UserVisit } from '../helpers/client-targets.js';
import { freePort } from '../helpers/net.js';

const require = createRequire(import.meta.url);
const proxyScript = join(require.resolve('mcp-remote/package.json'), '..', 'dist', 'proxy.js');

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

const KEPT_SCOPE = 'Authorizing with the scope the server asked for';
const AUTHORIZE_LINE = /Please authorize this client by visiting:\s*\n(\S+)/g;

/** mcp-remote as the desktop app runs it, and the user who answers each authorization URL it prints. */
class Bridge {
  readonly client = new Client({ name: 'desktop-app', version: '1.0.0' });
  readonly authorizationUrls: URL[] = [];
  readonly visits: UserVisit[] = [];
  private stderr = '';
  private answered = 0;
  private visiting: Promise<void> = Promise.resolve();

  private constructor(
    readonly transport: StdioClientTransport,
    private readonly dir: string,
    private readonly context: BrowserContext,
    private readonly username: string,
  ) {
    (transport.stderr as Readable).setEncoding('utf8').on('data', (chunk: string) => {
      this.stderr += chunk;
      this.answerNewUrls();
    });
  }

  static async start(mcpUrl: string, context: BrowserContext, username: string): Promise<Bridge> {
    const dir = await mkdtemp(join(tmpdir(), 'mag-mcp-remote-'));
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [proxyScript, mcpUrl, String(await freePort()), '--host', '127.0.0.1'],
      env: { PATH: process.env.PATH ?? '', HOME: dir, MCP_REMOTE_CONFIG_DIR: dir, BROWSER: 'true' },
      stderr: 'pipe',
    });
    return new Bridge(transport, dir, context, username);
  }

  /** Each URL mcp-remote prints is opened once in Chromium, in order. */
  private answerNewUrls(): void {
    const urls = [...this.stderr.matchAll(AUTHORIZE_LINE)].map((m) => m[1]!);
    for (const url of urls.slice(this.answered)) {
      this.answered++;
      this.authorizationUrls.push(new URL(url));
      this.visiting = this.visiting.then(async () => {
        // Mid-session, mcp-remote prints the URL before its callback server listens again; a person
        // takes longer than that to sign in, Chromium does not: wait for the port, as a person would.
        await listening(Number(new URL(new URL(url).searchParams.get('redirect_uri')!).port));
        const page = await this.context.newPage();
        page.setDefaultTimeout(10_000);
        try {
          this.visits.push(await userAuthorizes(page, url, this.username));
        } finally {
          await page.close();
        }
      });
    }
  }

  /** Every browser visit started so far has finished. */
  async settled(): Promise<void> {
    await this.visiting;
  }

  log(): string {
    return this.stderr.slice(-6000);
  }

  /** mcp-remote's applyScope says this when it keeps a scope it did not supply itself. */
  keptServerScope(scope: string): boolean {
    return this.stderr.includes(`${KEPT_SCOPE}: ${scope}\n`);
  }

  async close(): Promise<void> {
    await this.visiting.catch(() => undefined);
    await this.client.close().catch(() => undefined);
    await rm(this.dir, { recursive: true, force: true });
  }
}

/** Resolves once something accepts connections on the loopback port (at most 10 s). */
async function listening(port: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => (socket.destroy(), resolve(true)));
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    if (Date.now() > deadline) throw new Error(`nothing listens on 127.0.0.1:${port}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const scopesOf = (url: URL) => url.searchParams.get('scope')?.split(' ').sort();
const textOf = (result: unknown) => ((result as { content?: Array<{ text?: string }> }).content ?? []).map((c) => c.text).join(' ');

/** Connected through mcp-remote as a user would: one authorization for mcp:read, consent and login in Chromium. */
async function connected(bridge: Bridge, mcpUrl: string): Promise<URL> {
  await bridge.client.connect(bridge.transport);
  const [first] = bridge.authorizationUrls;
  expect(first, bridge.log()).toBeDefined();
  expect(first!.origin + first!.pathname).toBe(new URL('/authorize', mcpUrl).href);
  expect(first!.searchParams.get('resource')).toBe(mcpUrl);
  expect(first!.searchParams.get('code_challenge_method')).toBe('S256');
  expect(scopesOf(first!)).toEqual(['mcp:read']);
  await bridge.settled();
  expect(bridge.visits[0]!.consent).toContain('mcp:read');
  expect((await bridge.client.listTools()).tools.map((t) => t.name).sort()).toEqual(['add', 'echo', 'list_notes']);
  expect(textOf(await bridge.client.callTool({ name: 'add', arguments: { a: 2, b: 3 } }))).toBe('5');

  // Denied by policy: the call fails naming the denial; no authorization starts, the session goes on.
  const denied = await bridge.client.callTool({ name: 'shell', arguments: { command: 'id' } }).then(
    (result) => textOf(result),
    (err: unknown) => String(err),
  );
  expect(denied, bridge.log()).toMatch(/denied by policy: the tool 'shell' is not allowed/);
  expect(bridge.authorizationUrls).toHaveLength(1);
  expect(textOf(await bridge.client.callTool({ name: 'echo', arguments: { message: 'still here' } }))).toBe('still here');
  return first!;
}

const addNote = (bridge: Bridge) =>
  bridge.client.callTool({ name: 'add_note', arguments: { text: 'from mcp-remote' } }, undefined, { timeout: 60_000 }).then(
    (result) => textOf(result),
    (err: unknown) => `${String(err)}`,
  );

/** add_note's 403 insufficient_scope: mcp-remote authorizes again mid-session for the union, with the same client, through a consent page naming mcp:write, and the retried call succeeds. */
async function stepsUp(bridge: Bridge, first: URL): Promise<void> {
  expect(await addNote(bridge), bridge.log()).toMatch(/^added note \d+$/);
  await bridge.settled();
  expect(bridge.authorizationUrls).toHaveLength(2);
  const stepUp = bridge.authorizationUrls[1]!;
  expect(scopesOf(stepUp)).toEqual(['mcp:read', 'mcp:write']);
  expect(bridge.keptServerScope('mcp:read mcp:write'), bridge.log()).toBe(true);
  expect(stepUp.searchParams.get('client_id')).toBe(first.searchParams.get('client_id'));
  expect(bridge.visits[1]!.error).toBeUndefined();
  expect(bridge.visits[1]!.consent).toContain('mcp:write');
}

describe.each([
  ['a route of a test gateway', 'route', 'remote-alice'],
  ['the demo', 'demo', 'remote-bob'],
] as const)('mcp-remote 0.15 through %s, browser steps in Chromium', (_label, target, username) => {
  it('discovers, registers, consent and login, tools; a denial reads as one and starts no authorization; steps up mid-session through a new consent naming mcp:write', async () => {
    const { mcpUrl } = targets[target]!;
    const context = await browser.newContext();
    const bridge = await Bridge.start(mcpUrl, context, username);
    try {
      const first = await connected(bridge, mcpUrl);
      await stepsUp(bridge, first);
      // The session goes on with the wider token.
      expect(textOf(await bridge.client.callTool({ name: 'echo', arguments: { message: 'after' } }))).toBe('after');
    } finally {
      await bridge.close();
      await context.close();
    }
  }, 120_000);
});
