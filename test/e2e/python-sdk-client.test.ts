/**
 * A second MCP client written by others: the official Python SDK (mcp 2.3.0, its own
 * `OAuthClientProvider`), unmodified, with the browser steps in Chromium, through the demo
 * (`mcp-auth-gateway demo`) and through a route of a test gateway (client-targets.ts).
 *
 *   test/clients/python/oauth_client.py ──▶ gateway (built-in AS, dev login) ──▶ demo MCP server
 *                 │ prints the authorization URL          ▲
 *                 ▼                                        │ consent, login, redirect to the script's
 *            this test ──▶ Chromium (playwright-core) ─────┘ loopback callback (RFC 8252)
 *
 * As a user would, with nothing registered ahead: the SDK discovers (401 → RFC 9728 → RFC 8414),
 * registers itself (RFC 7591) with the first challenge's scope (mcp:read), the user approves and
 * signs in, tools/list and tools/call work. add_note needs mcp:write: the SDK's step-up on 403
 * insufficient_scope authorizes again for mcp:read mcp:write, a second consent page names
 * mcp:write (the consent remembered for mcp:read does not cover it), and the call succeeds
 * (DESIGN §8.3: a dynamic client's registered scope bounds nothing). `shell` is denied by policy:
 * 403 with a JSON-RPC error body, which the SDK raises as the call's error saying "denied by
 * policy", and no third authorization (DESIGN §8.4).
 *
 * The virtualenv (test/tools/py/venv) comes from .ci/run or is created here when missing; without
 * python3 or chromium this fails with what to install, it is never skipped.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium, startDemoTarget, startRouteTarget, userAuthorizes, type ClientTarget } from '../helpers/client-targets.js';
import { ensurePythonSdk, venvPython } from '../tools/python-sdk.js';

const script = new URL('../clients/python/oauth_client.py', import.meta.url).pathname;

let browser: Browser;
const targets: Partial<Record<ClientTarget['name'], ClientTarget>> = {};

beforeAll(async () => {
  ensurePythonSdk();
  const [demo, route, chromium] = await Promise.all([startDemoTarget(), startRouteTarget(), launchChromium()]);
  Object.assign(targets, { demo, route });
  browser = chromium;
}, 600_000);

afterAll(async () => {
  await browser?.close();
  await Promise.all(Object.values(targets).map((t) => t.stop()));
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

const called = (client: PythonClient, name: string) => client.events.find((e) => (e.event === 'called' || e.event === 'call_failed') && e.name === name);

describe.each(['demo', 'route'] as const)('the official Python MCP SDK (mcp 2.3.0) through the %s, browser steps in Chromium', (name) => {
  it('discovers, registers itself with mcp:read, gets consent and login, calls tools; steps up to mcp:write without pre-registration (a new consent names it); a denial reads as one and asks for nothing', async () => {
    const { mcpUrl } = targets[name]!;
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

      const firstVisit = await userAuthorizes(page, first.url as string, 'py-alice');
      expect(firstVisit.consent).toContain('Python SDK test client');
      const [callback] = await client.next('callback', a);
      // RFC 9207: the response named the issuer, and the SDK checked it.
      expect(callback.iss).toBe(new URL(mcpUrl).origin);
      expect((await client.next('tokens', a))[0].scope).toBe('mcp:read');

      // The SDK probed server/discover (2026-07-28) and fell back to initialize: the demo server is older.
      expect((await client.next('connected', a))[0].protocol_version).toBe('2025-11-25');
      const [tools, t] = await client.next('tools', a);
      // mcp:read only: the write tools and the denied one are filtered out, and the list is marked
      // private (SEP-2549), which the SDK's own response cache reads.
      expect(tools.names).toEqual(['add', 'echo', 'list_notes']);
      expect(tools.cache_scope).toBe('private');
      await client.next('called', t);
      expect(called(client, 'add')).toMatchObject({ event: 'called', is_error: false, text: ['5'] });

      // add_note needs mcp:write: 403 insufficient_scope → the SDK asks for mcp:read mcp:write, with
      // the client it registered for mcp:read.
      const [stepUp, s] = await client.next('authorize', t);
      const stepUpUrl = new URL(stepUp.url as string);
      expect(stepUpUrl.searchParams.get('scope')?.split(' ').sort()).toEqual(['mcp:read', 'mcp:write']);
      expect(stepUpUrl.searchParams.get('client_id')).toBe(registered.client_id);
      const stepUpVisit = await userAuthorizes(page, stepUp.url as string, 'py-alice');
      // Wider scopes ask again: the consent remembered for mcp:read does not cover mcp:write.
      expect(stepUpVisit.error).toBeUndefined();
      expect(stepUpVisit.consent).toContain('mcp:write');
      const [tokens] = await client.next('tokens', s);
      expect((tokens.scope as string).split(' ').sort()).toEqual(['mcp:read', 'mcp:write']);

      const [done] = await client.next('done', s);
      expect(called(client, 'add_note')).toMatchObject({ event: 'called', is_error: false });
      expect((called(client, 'add_note')!.text as string[]).join(' ')).toMatch(/added note/);
      // A tool no scope allows: the SDK raises the JSON-RPC error of the 403's body, saying so.
      expect(called(client, 'shell')).toMatchObject({ event: 'call_failed', error: 'MCPError', code: -32003 });
      expect(called(client, 'shell')!.message).toMatch(/^denied by policy: the tool 'shell' is not allowed/);
      // No challenge: no third authorization, and the session goes on.
      expect(client.events.filter((e) => e.event === 'authorize')).toHaveLength(2);
      expect(called(client, 'echo')).toMatchObject({ event: 'called', is_error: false, text: ['still here'] });
      expect((done.scope as string).split(' ').sort()).toEqual(['mcp:read', 'mcp:write']);
      expect(await client.exitCode(), client.transcript()).toBe(0);
    } finally {
      client.kill();
      await context.close();
    }
  }, 120_000);
});
