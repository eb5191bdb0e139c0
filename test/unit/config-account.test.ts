// `account: { enabled: true }` (the connected-apps page): only with the built-in
// authorization server, whose login and grants it uses; its paths are reserved.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { ConfigError } from '../../src/config/config-error.js';
import { loadConfig } from '../../src/config/load.js';
import { isReservedPath } from '../../src/config/reserved-paths.js';

const ROUTE = 'path: /a/mcp\nupstream: http://127.0.0.1:3000/mcp\n';
const BASE = 'listen: { host: 127.0.0.1, port: 9000 }\npublic_url: http://127.0.0.1:9000\n';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mag-config-account-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function load(gatewayYaml: string, route = ROUTE) {
  await writeFile(join(dir, 'gateway.yaml'), gatewayYaml);
  await writeFile(join(dir, 'a.yaml'), route);
  return loadConfig(dir, {});
}

async function errors(gatewayYaml: string, route?: string): Promise<string[]> {
  const err = await load(gatewayYaml, route).then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(ConfigError);
  return (err as ConfigError).message.split('\n').map((line) => line.replace(`${dir}/`, ''));
}

describe('account (the connected-apps page)', () => {
  it('turns the page on for the built-in authorization server', async () => {
    const config = await load(`${BASE}authorization_server: { enabled: true }\naccount: { enabled: true }\n`);
    expect(config.authorizationServer?.accountPage).toBe(true);
  });

  it('is off unless asked for, and off when asked for off', async () => {
    expect((await load(`${BASE}authorization_server: { enabled: true }\n`)).authorizationServer?.accountPage).toBeFalsy();
    expect((await load(`${BASE}authorization_server: { enabled: true }\naccount: { enabled: false }\n`)).authorizationServer?.accountPage).toBeFalsy();
  });

  it.each([
    ['no authorization_server section', `${BASE}account: { enabled: true }\n`, 3],
    ['the built-in AS disabled', `${BASE}authorization_server: { enabled: false }\naccount: { enabled: true }\n`, 4],
  ])('is a configuration error without the built-in AS (%s), with its line and why', async (_name, yaml, line) => {
    const route = 'path: /a/mcp\nupstream: http://127.0.0.1:3000/mcp\nauthorization_servers: [https://idp.example.com]\ntoken: { jwt: { issuer: https://idp.example.com } }\n';
    expect(await errors(yaml, route)).toEqual([
      `gateway.yaml:${line}:21: account.enabled: the connected-apps page needs the built-in authorization server (authorization_server: { enabled: true }): it signs users in with its login and lists the grants it issued`,
    ]);
  });

  it('refuses an unknown key under account', async () => {
    const [issue] = await errors(`${BASE}authorization_server: { enabled: true }\naccount: { enabled: true, lifetime: 1h }\n`);
    expect(issue).toMatch(/^gateway\.yaml:4:\d+: account.*lifetime/);
  });

  it('reserves /account/ for the page, whether or not it is on', async () => {
    expect(await errors(`${BASE}authorization_server: { enabled: true }\n`, 'path: /account/mcp\nupstream: http://127.0.0.1:3000/mcp\n')).toEqual([
      "a.yaml:1:7: path: /account/mcp is reserved for the gateway's own endpoints",
    ]);
    for (const path of ['/account/apps', '/account/apps/revoke', '/account/sign-out', '/account/x/mcp']) expect(isReservedPath(path)).toBe(true);
    for (const path of ['/account', '/accounts/mcp', '/my/account/mcp']) expect(isReservedPath(path)).toBe(false);
  });

  it("the example of docs/authorization-server.md turns the page on (on a loopback gateway, as its dev login needs)", async () => {
    const page = await readFile(new URL('../../docs/authorization-server.md', import.meta.url), 'utf8');
    const section = page.slice(page.indexOf('## Connected apps'));
    const block = /```yaml\n([\s\S]*?)```/.exec(section)![1]!;
    const example = parse(block) as Record<string, unknown>;
    expect(example.account).toEqual({ enabled: true });
    const config = await load(`${BASE}${stringify(example)}`);
    expect(config.authorizationServer?.accountPage).toBe(true);
    expect(config.authorizationServer?.login.kind).toBe('dev');
  });
});
