// What the tests of clients written by others (test/e2e/*-client.test.ts) point them at, and the
// user they meet in Chromium (playwright-core, Debian's chromium):
// - `demo`: `mcp-auth-gateway demo` as a user runs it (demo-process.ts);
// - `route`: a test gateway from configuration files, the built-in AS with the dev login, in front of
//   the demo MCP server, whose rules deny `shell` by an allow-list (`allow_clients`) rather than
//   `deny`: both kinds of denial reach clients the same way (DESIGN §8.4).
// Both: `mcp:read` to connect, `add_note` and `delete_note` need `mcp:write`, `shell` is denied by policy.
import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startDemoMcpServer } from '../../src/demo/demo-mcp-server.js';
import { startAsGateway } from './authorization-server.js';
import { startDemo } from './demo-process.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

export interface ClientTarget {
  name: 'demo' | 'route';
  mcpUrl: string;
  stop(): Promise<void>;
}

export async function startDemoTarget(): Promise<ClientTarget> {
  const demo = await startDemo();
  return { name: 'demo', mcpUrl: demo.mcpUrl, stop: () => demo.stop() };
}

export async function startRouteTarget(): Promise<ClientTarget> {
  const upstream = await startDemoMcpServer();
  const gateway = await startAsGateway({
    upstream: upstream.url,
    routes: {
      'notes.yaml': {
        path: '/notes/mcp',
        // A third scope no rule needs: an operation's challenge (mcp:read mcp:write) is then not the
        // whole list, which mcp-remote 0.15 treats differently (mcp-remote-client.test.ts).
        scopes_supported: ['mcp:read', 'mcp:write', 'mcp:admin'],
        required_scopes: ['mcp:read'],
        rules: [
          { match: { method: 'tools/call', tool: 'add_note' }, require_scopes: ['mcp:write'] },
          { match: { method: 'tools/call', tool: 'delete_*' }, require_scopes: ['mcp:write'] },
          { match: { method: 'tools/call', tool: 'shell' }, allow_clients: ['ops-console'] },
        ],
        filter_tools_list: true,
      },
    },
  });
  return {
    name: 'route',
    mcpUrl: `${gateway.issuer}/notes/mcp`,
    async stop() {
      await gateway.stop();
      await upstream.close();
    },
  };
}

/** Chromium as the tests run it; fails with what to install when it is missing (never skipped). */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (or set CHROMIUM_PATH)`);
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/** What the user saw: the consent page's text (absent when a remembered consent skipped it), or the error page that stopped them. */
export interface UserVisit {
  consent?: string;
  error?: string;
}

/**
 * The user in Chromium: opens the authorization URL, approves the consent page when there is one,
 * signs in as `username`, and waits until the browser reaches the client's redirect URI. Stops on a
 * page that is neither (an error page) and returns its text.
 */
export async function userAuthorizes(page: Page, authorizationUrl: string, username: string): Promise<UserVisit> {
  const redirectUri = new URL(authorizationUrl).searchParams.get('redirect_uri')!;
  const reached = page.waitForURL((url) => url.href.startsWith(redirectUri));
  reached.catch(() => undefined);
  await page.goto(authorizationUrl);
  const visit: UserVisit = {};
  const approve = page.locator('button[value="approve"]');
  const login = page.locator('input[name="username"]');
  if ((await approve.count()) > 0) {
    visit.consent = await page.locator('body').innerText();
    await approve.click();
    await login.waitFor({ state: 'visible' });
  } else if ((await login.count()) === 0) {
    return { error: await page.locator('body').innerText() };
  }
  await login.fill(username);
  await Promise.all([reached, login.press('Enter')]);
  return visit;
}
