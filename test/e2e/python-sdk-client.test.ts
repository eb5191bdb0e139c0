/**
 * A second MCP client written by others: the official Python SDK (mcp 2.3.0, its own
 * `OAuthClientProvider`) against `mcp-auth-gateway demo`, with the browser steps in Chromium.
 *
 *   test/clients/python/oauth_client.py ──▶ demo gateway (built-in AS, dev login) ──▶ demo MCP server
 *                 │ prints the authorization URL          ▲
 *                 ▼                                        │ consent, login, redirect to the script's
 *            this test ──▶ Chromium (playwright-core) ─────┘ loopback callback (RFC 8252)
 *
 * First run, as a user would: the SDK discovers (401 → RFC 9728 → RFC 8414), registers itself
 * (RFC 7591), the user approves and signs in, tools/list and tools/call work. The SDK registers
 * with the first challenge's scope (mcp:read), so its step-up to mcp:write asks for more than the
 * client registered, which the built-in AS refuses on an error page (SECURITY J46): that is the
 * known conflict of DESIGN §7.1 with SDK step-up, asserted here as it happens. The SDK does not
 * fail only that call: the OAuth error escapes its transport's task group and ends the client.
 * Second run: the client registered for both scopes first (as the TS SDK demo test does); the
 * SDK's step-up on 403 insufficient_scope then authorizes again for mcp:read mcp:write, a second
 * consent page names mcp:write, and the call succeeds.
 *
 * The virtualenv (test/tools/py/venv) comes from .ci/run or is created here when missing; without
 * python3 or chromium this fails with what to install, it is never skipped.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/net.js';
import { ensurePythonSdk, venvPython } from '../tools/python-sdk.js';

const require = createRequire(import.meta.url);
const tsxLoader = require.resolve('tsx');
const cli = new URL('../../src/cli.ts', import.meta.url).pathname;
const script = new URL('../clients/python/oauth_client.py', import.meta.url).pathname;
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

let demo: ChildProcess;
let dir: string;
let mcpUrl: string;
let browser: Browser;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (or set CHROMIUM_PATH)`);
  ensurePythonSdk();
  dir = await mkdtemp(join(tmpdir(), 'mag-python-demo-'));
  const port = await freePort();
  demo = spawn(process.execPath, ['--import', tsxLoader, '-e', `import(${JSON.stringify(cli)}).then((m) => m.main(['demo']))`], {
    cwd: dir,
    env: { ...process.env, PORT: String(port), LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // Its audit lines go to stderr; not this test's subject.
  demo.stderr!.resume();
  let stdout = '';
  mcpUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`demo did not start:\n${stdout}`)), 30_000);
    demo.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
      const url = /MCP server URL:\s+(\S+)/.exec(stdout)?.[1];
      if (url) {
        clearTimeout(timer);
        resolve(url);
      }
    });
    demo.once('exit', (code) => reject(new Error(`demo exited with ${code}:\n${stdout}`)));
  });
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}, 600_000);

afterAll(async () => {
  await browser?.close();
  if (demo && demo.exitCode === null) {
    const exited = new Promise((resolve) => demo.once('exit', resolve));
    demo.kill('SIGTERM');
    await exited;
  }
  if (dir) await rm(dir, { recursive: true, force: true });
});

interface PyEvent {
  event: string;
  [field: string]: unknown;
}

/** The Python client as a child process: its JSON events in order, and what the browser saw for it. */
class PythonClient {
  readonly events: PyEvent[] = [];
  readonly pages: { url: string; text: string }[] = [];
  private readonly child: ChildProcess;
  private buffered = '';
  private stderr = '';
  private readonly exited: Promise<number | null>;
  private wake: (() => void) | undefined;

  constructor(args: string[]) {
    this.child = spawn(venvPython, ['-u', script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      this.buffered += chunk;
      let newline: number;
      while ((newline = this.buffered.indexOf('\n')) !== -1) {
        const line = this.buffered.slice(0, newline);
        this.buffered = this.buffered.slice(newline + 1);
        if (line.trim()) this.events.push(JSON.parse(line) as PyEvent);
      }
      this.wake?.();
    });
    this.child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (this.stderr += chunk));
    this.exited = new Promise((resolve) => this.child.once('exit', (code) => (this.wake?.(), resolve(code))));
  }

  /** Waits for the next event at or after `from` with this name; fails with the transcript otherwise. */
  async next(name: string, from: number, timeoutMs = 30_000): Promise<[PyEvent, number]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const at = this.events.findIndex((e, i) => i >= from && (e.event === name || (e.event === 'crashed' && name !== 'crashed')));
      if (at !== -1 && this.events[at]!.event === name) return [this.events[at]!, at];
      if (at !== -1 || this.child.exitCode !== null || Date.now() > deadline) {
        throw new Error(`no "${name}" event from the Python client:\n${this.transcript()}`);
      }
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        setTimeout(resolve, 200);
      });
    }
  }

  transcript(): string {
    return [...this.events.map((e) => JSON.stringify(e)), '--- stderr ---', this.stderr.slice(-4000)].join('\n');
  }

  async exitCode(): Promise<number | null> {
    return this.exited;
  }

  kill(): void {
    if (this.child.exitCode === null) this.child.kill('SIGKILL');
  }
}

/**
 * The user in Chromium: opens the authorization URL, approves the consent page and signs in as
 * `username`. Returns true when the browser reached the client's redirect URI; false (after
 * telling the client to give up) when the gateway showed a page without a consent form.
 */
async function userAuthorizes(page: Page, authorizationUrl: string, username: string, client: PythonClient): Promise<boolean> {
  const redirectUri = new URL(authorizationUrl).searchParams.get('redirect_uri')!;
  const response = await page.goto(authorizationUrl);
  const approve = page.locator('button[value="approve"]');
  if ((await approve.count()) === 0) {
    client.pages.push({ url: page.url(), text: await page.locator('body').innerText() });
    expect(response?.status()).toBe(400);
    await fetch(new URL('/abandon', redirectUri));
    return false;
  }
  client.pages.push({ url: page.url(), text: await page.locator('body').innerText() });
  await approve.click();
  const username_ = page.locator('input[name="username"]');
  await username_.waitFor({ state: 'visible' });
  await username_.fill(username);
  await Promise.all([page.waitForURL((url) => url.href.startsWith(redirectUri)), username_.press('Enter')]);
  return true;
}

const called = (client: PythonClient, name: string) => client.events.find((e) => (e.event === 'called' || e.event === 'call_failed') && e.name === name);

describe('the official Python MCP SDK (mcp 2.3.0) through the demo, browser steps in Chromium', () => {
  it('discovers, registers itself, gets consent and login, lists and calls tools; its step-up past the registered scope is refused on an error page (J46)', async () => {
    const client = new PythonClient([mcpUrl]);
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      page.setDefaultTimeout(10_000);
      const [first, a] = await client.next('authorize', 0);
      const authorize = new URL(first.url as string);
      // Discovery led the SDK to the built-in AS's endpoint, with PKCE S256 and the route as resource.
      expect(authorize.origin + authorize.pathname).toBe(new URL('/authorize', mcpUrl).href);
      expect(authorize.searchParams.get('code_challenge_method')).toBe('S256');
      expect(authorize.searchParams.get('resource')).toBe(mcpUrl);
      expect(authorize.searchParams.get('scope')).toBe('mcp:read');
      // Registered itself first (RFC 7591), with the scope of the first challenge only.
      const registered = client.events.slice(0, a).find((e) => e.event === 'registered')!;
      expect(registered.client_id).toBe(authorize.searchParams.get('client_id'));
      expect(registered.scope).toBe('mcp:read');

      expect(await userAuthorizes(page, first.url as string, 'py-alice', client)).toBe(true);
      expect(client.pages[0]!.text).toContain('Python SDK test client');
      const [callback] = await client.next('callback', a);
      // RFC 9207: the response named the issuer, and the SDK checked it.
      expect(callback.iss).toBe(new URL(mcpUrl).origin);
      const [tokens] = await client.next('tokens', a);
      expect(tokens.scope).toBe('mcp:read');

      // The SDK probed server/discover (2026-07-28) and fell back to initialize: the demo server is older.
      expect((await client.next('connected', a))[0].protocol_version).toBe('2025-11-25');
      const [tools, t] = await client.next('tools', a);
      // mcp:read only: the write tools and the denied one are filtered out, and the list is marked
      // private (SEP-2549), which the SDK's own response cache reads.
      expect(tools.names).toEqual(['add', 'echo', 'list_notes']);
      expect(tools.cache_scope).toBe('private');
      await client.next('called', t);
      expect(called(client, 'add')).toMatchObject({ event: 'called', is_error: false, text: ['5'] });

      // add_note needs mcp:write: 403 insufficient_scope → the SDK asks for mcp:read mcp:write.
      const [stepUp, s] = await client.next('authorize', t);
      expect(new URL(stepUp.url as string).searchParams.get('scope')?.split(' ').sort()).toEqual(['mcp:read', 'mcp:write']);
      expect(await userAuthorizes(page, stepUp.url as string, 'py-alice', client)).toBe(false);
      expect(client.pages[1]!.text).toMatch(/scope/i);
      // What the SDK does then: the OAuth error ends the whole client, not just this call.
      const [crashed] = await client.next('crashed', s);
      expect(crashed.causes).toEqual([{ error: 'OAuthFlowError', message: 'the browser never came back to the redirect URI' }]);
      expect(called(client, 'add_note')).toBeUndefined();
      expect(await client.exitCode()).toBe(1);
    } finally {
      client.kill();
      await context.close();
    }
  }, 120_000);

  it('steps up on 403 insufficient_scope when the client registered for both scopes: a second consent names mcp:write, the call succeeds', async () => {
    const redirectPlaceholder = `http://127.0.0.1:${await freePort()}/callback`;
    const registration = await fetch(new URL('/register', mcpUrl), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'Python SDK test client', redirect_uris: [redirectPlaceholder], grant_types: ['authorization_code', 'refresh_token'], token_endpoint_auth_method: 'none', scope: 'mcp:read mcp:write' }),
    });
    expect(registration.status).toBe(201);
    const { client_id: clientId } = (await registration.json()) as { client_id: string };

    const client = new PythonClient([mcpUrl, clientId]);
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      page.setDefaultTimeout(10_000);
      const [first, a] = await client.next('authorize', 0);
      expect(client.events.some((e) => e.event === 'registered')).toBe(false);
      expect(await userAuthorizes(page, first.url as string, 'py-bob', client)).toBe(true);
      const [tools, t] = await client.next('tools', a);
      expect(tools.names).toEqual(['add', 'echo', 'list_notes']);

      const [stepUp, s] = await client.next('authorize', t);
      expect(new URL(stepUp.url as string).searchParams.get('scope')?.split(' ').sort()).toEqual(['mcp:read', 'mcp:write']);
      expect(await userAuthorizes(page, stepUp.url as string, 'py-bob', client)).toBe(true);
      // Wider scopes ask again: the second consent page names mcp:write.
      expect(client.pages[1]!.text).toContain('mcp:write');
      const [tokens] = await client.next('tokens', s);
      expect((tokens.scope as string).split(' ').sort()).toEqual(['mcp:read', 'mcp:write']);

      const [done] = await client.next('done', s);
      expect(called(client, 'add_note')).toMatchObject({ event: 'called', is_error: false });
      expect((called(client, 'add_note')!.text as string[]).join(' ')).toMatch(/added note/);
      // A tool no scope allows: 403 without a challenge, so no third authorization.
      expect(called(client, 'shell')).toMatchObject({ event: 'call_failed' });
      expect(client.events.filter((e) => e.event === 'authorize')).toHaveLength(2);
      expect((done.scope as string).split(' ').sort()).toEqual(['mcp:read', 'mcp:write']);
      expect(await client.exitCode(), client.transcript()).toBe(0);
    } finally {
      client.kill();
      await context.close();
    }
  }, 120_000);
});
