/**
 * The configurations the docs show are ones the gateway accepts: the YAML blocks
 * of the README and of docs/ that are whole configurations, the examples of the
 * reference pages (docs/configuration.md, policies.md, dpop.md, upstreams.md,
 * authorization-server.md, idps/), and the directory the `docker run`
 * of docs/deployment.md mounts, with that command's environment. Each goes
 * through the same loader as `check` and `serve`.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig } from '../../src/config/load.js';
import { isLoopbackHost } from '../../src/config/urls.js';
import { generateSigningKey } from '../../src/authorization-server/keys/signing-keys.js';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
/** Secrets the examples name with { env: … }: any value will do. */
const SECRETS_ENV = {
  IDP_CLIENT_SECRET: 'idp-secret',
  CI_BOT_SECRET: 'ci-bot-secret',
  GITHUB_PAT: 'github-pat',
  MCP_AGENT_SECRET: 'agent-secret',
  DPOP_NONCE_KEY: 'docs-example-dpop-nonce-key-0123456789',
  UPSTREAM_TOKENS_KEY: 'docs-example-upstream-tokens-key-0123456789',
};
/** Where the examples mount files (`{ file: /secrets/… }`); the test puts them in a temporary directory. */
const SECRETS_MOUNT = '/secrets/';

let scratch: string;
beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'mag-docs-'));
  await mkdir(join(scratch, 'secrets'));
  await writeFile(join(scratch, 'secrets', 'signing.jwk.json'), JSON.stringify(await generateSigningKey()));
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

/** The fenced blocks of one language in a Markdown file, with the text before each. */
async function fencedBlocks(file: string, language: string): Promise<{ before: string; text: string }[]> {
  const markdown = await readFile(join(REPO, file), 'utf8');
  const blocks: { before: string; text: string }[] = [];
  const fence = new RegExp('^```' + language + '\\n([\\s\\S]*?)^```', 'gm');
  for (const match of markdown.matchAll(fence)) blocks.push({ before: markdown.slice(0, match.index), text: match[1]! });
  return blocks;
}

/** The section of `file` under `heading`: its first block of `language`. */
async function firstBlockUnder(file: string, heading: string, language = 'yaml'): Promise<string | undefined> {
  const blocks = await fencedBlocks(file, language);
  return blocks.find(({ before }) => before.includes(heading) && !before.slice(before.lastIndexOf(heading)).includes('```'))?.text;
}

/** Writes a docs config into its own directory, with the mounted secret files under the scratch directory. */
async function writeConfig(name: string, files: Record<string, string>): Promise<string> {
  const dir = join(scratch, name);
  await mkdir(dir, { recursive: true });
  for (const [file, text] of Object.entries(files)) await writeFile(join(dir, file), text.replaceAll(SECRETS_MOUNT, join(scratch, 'secrets') + '/'));
  return dir;
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** Its YAML blocks that are whole configurations (public_url and routes). */
async function wholeConfigs(file: string): Promise<string[]> {
  return (await fencedBlocks(file, 'yaml')).map(({ text }) => text).filter((text) => {
    const data: unknown = parse(text);
    return isRecord(data) && 'public_url' in data && 'routes' in data;
  });
}

describe('README and docs/', () => {
  it('every YAML block that is a whole configuration (public_url and routes) loads', async () => {
    // The README and the pages its reference moved to: every YAML block there parses.
    const pages = ['README.md', ...['configuration', 'upstreams', 'policies', 'authorization-server', 'dpop', 'cli', 'operations', 'user-oauth', 'deployment'].map((name) => `docs/${name}.md`)];
    const whole = (await Promise.all(pages.map(async (page) => (await wholeConfigs(page)).map((text) => ({ page, text }))))).flat();
    // The quick start (an external IdP, the built-in AS on a laptop), and the reference's: the built-in AS
    // in production, DPoP with nonces, a user_oauth route.
    expect(whole.filter(({ page }) => page === 'README.md').length).toBeGreaterThanOrEqual(2);
    expect(whole.map(({ page }) => page)).toEqual(expect.arrayContaining(['docs/authorization-server.md', 'docs/dpop.md', 'docs/user-oauth.md']));
    for (const [i, { page, text }] of whole.entries()) {
      const dir = await writeConfig(`whole-${i}`, { 'gateway.yaml': text });
      const config = await loadConfig(join(dir, 'gateway.yaml'), SECRETS_ENV);
      expect(config.routes.length, `${page}\n${text}`).toBeGreaterThan(0);
    }
  });

  it('the headless client goes into the built-in AS configuration as shown', async () => {
    const blocks = await fencedBlocks('README.md', 'yaml');
    const clients = blocks.find(({ text }) => /grant_types: \[client_credentials\]/.test(text) && !/rate_limits/.test(text));
    const laptop = blocks.find(({ text }) => /login: \{ kind: dev \}/.test(text) && /^routes:/m.test(text));
    expect(clients && laptop).toBeTruthy();
    const merged = parse(laptop!.text) as { authorization_server: Record<string, unknown> };
    merged.authorization_server = { ...merged.authorization_server, ...(parse(clients!.text) as typeof merged).authorization_server };
    const dir = await writeConfig('readme-headless', { 'gateway.yaml': JSON.stringify(merged) });
    const config = await loadConfig(join(dir, 'gateway.yaml'), SECRETS_ENV);
    expect(config.authorizationServer?.clients?.map((c) => [c.clientId, c.grantTypes])).toEqual([['ci-bot', ['client_credentials']]]);
  });

  it('the reference example of docs/configuration.md (gateway.yaml and one route) loads as a directory', async () => {
    const blocks = await fencedBlocks('docs/configuration.md', 'yaml');
    const start = blocks.findIndex(({ before }) => before.trimEnd().endsWith('A complete example in front of an MCP server that trusts an existing IdP:'));
    expect(start).toBeGreaterThanOrEqual(0);
    const [gateway, route] = [blocks[start]!.text, blocks[start + 1]!.text];
    expect(gateway).toMatch(/^# policies\/gateway\.yaml/);
    expect(route).toMatch(/^# policies\/github\.yaml/);
    const dir = await writeConfig('configuration-reference', { 'gateway.yaml': gateway, 'github.yaml': route });
    const config = await loadConfig(dir, SECRETS_ENV);
    expect(config.routes.map((r) => r.path)).toEqual(['/github/mcp']);
  });
});

describe('docs/policies.md: rate limits per route', () => {
  it('the example route loads, with every limit as written', async () => {
    const route = await firstBlockUnder('docs/policies.md', '## Rate limits per route');
    expect(route).toMatch(/^# policies\/github\.yaml/);
    const gateway = 'listen: { host: 127.0.0.1 }\npublic_url: http://127.0.0.1:8080\nauthorization_server: { enabled: true, login: { kind: dev } }\n';
    const dir = await writeConfig('policies-rate-limits', { 'gateway.yaml': gateway, 'github.yaml': route! });
    const config = await loadConfig(dir, SECRETS_ENV);
    expect(config.routes[0]!.rateLimits.map(({ per, requests, windowMs, match }) => [per, requests, windowMs, match ?? null])).toEqual([
      ['principal', 120, 60_000, null],
      ['client', 1000, 60_000, null],
      ['subject', 300, 60_000, null],
      ['principal', 5, 3_600_000, { method: 'tools/call', tool: 'delete_*' }],
    ]);
  });
});

describe('docs/dpop.md', () => {
  it('the example route loads with dpop: required and its htu', async () => {
    const route = await firstBlockUnder('docs/dpop.md', '# DPoP: tokens bound to the client\'s key');
    expect(route).toMatch(/^# policies\/github\.yaml/);
    const dir = await writeConfig('dpop', { 'gateway.yaml': 'listen: { host: 127.0.0.1 }\npublic_url: https://mcp.example.com\n', 'github.yaml': route! });
    const config = await loadConfig(dir, SECRETS_ENV);
    expect(config.routes[0]!.dpop).toEqual({ required: true, htu: 'https://mcp.example.com/github/mcp', nonce: false });
  });
});

describe('docs/authorization-server.md: enterprise-managed authorization (ID-JAG)', () => {
  it('the example loads: one enterprise IdP, and a confidential client with the jwt-bearer grant', async () => {
    const example = await firstBlockUnder('docs/authorization-server.md', '## Enterprise-managed authorization (ID-JAG)');
    expect(example).toMatch(/^# policies\/gateway\.yaml/);
    const gateway = `listen: { host: 127.0.0.1 }\npublic_url: https://mcp.example.com\n${example!.replace(/^authorization_server:/m, 'authorization_server:\n  signing_key: { file: /secrets/signing.jwk.json }\n  login: { kind: oidc, issuer: https://idp.example.com, client_id: gw }')}`;
    const dir = await writeConfig('id-jag', { 'gateway.yaml': gateway, 'r.yaml': 'path: /a/mcp\nupstream: http://127.0.0.1:3000/mcp\n' });
    const config = await loadConfig(dir, SECRETS_ENV);
    expect(config.authorizationServer?.enterpriseIdps).toEqual([{ issuer: 'https://acme.okta.com', jwksUri: 'https://acme.okta.com/oauth2/v1/keys' }]);
    expect(config.authorizationServer?.clients?.map((c) => [c.clientId, c.grantTypes, c.clientSecret])).toEqual([['ai-agent', ['urn:ietf:params:oauth:grant-type:jwt-bearer'], 'agent-secret']]);
  });
});

describe('docs/upstreams.md: isolating stdio servers', () => {
  it('the example route loads with its sandbox and user (as root; otherwise the user is refused, naming the capabilities)', async () => {
    const route = await firstBlockUnder('docs/upstreams.md', '### Isolating stdio servers');
    expect(route).toMatch(/^# policies\/memory\.yaml/);
    // The example's install folder, made here.
    const srv = join(scratch, 'srv-mcp');
    await mkdir(join(srv, 'node_modules'), { recursive: true });
    const dir = await writeConfig('upstreams-isolation', {
      'gateway.yaml': 'listen: { host: 127.0.0.1 }\npublic_url: http://127.0.0.1:8080\nauthorization_server: { enabled: true, login: { kind: dev } }\n',
      'memory.yaml': route!.replaceAll('/srv/mcp/', `${srv}/`),
    });
    if (process.geteuid?.() !== 0) {
      await expect(loadConfig(dir, SECRETS_ENV)).rejects.toThrow(/upstream\.stdio\.user: the gateway \(uid \d+\) lacks CAP_/);
      return;
    }
    const config = await loadConfig(dir, SECRETS_ENV);
    expect(config.routes[0]!.stdio).toMatchObject({
      command: 'node',
      sandbox: { kind: 'bubblewrap', readable: [join(srv, 'node_modules')], writable: [], network: false },
      user: { uid: 65534, gid: 65534 },
    });
  });
});

describe('docs/deployment.md', () => {
  it('the docker run example mounts a configuration that starts in the image', async () => {
    const command = (await fencedBlocks('docs/deployment.md', 'sh')).map(({ text }) => text.replaceAll('\\\n', ' ')).find((text) => text.includes('docker run'));
    expect(command).toBeDefined();
    const mount = /-v "\$PWD\/([^:"]+):\/etc\/mcp-auth-gateway:ro"/.exec(command!)?.[1];
    expect(mount, 'a configuration directory mounted at the image entrypoint\'s --config').toBeDefined();
    const env = Object.fromEntries([...command!.matchAll(/-e ([A-Z_]+)=(\S+)/g)].map((m) => [m[1]!, m[2]!]));
    const published = Number(/-p \d+:(\d+)/.exec(command!)?.[1]);

    const config = await loadConfig(join(REPO, mount!), env);
    // Reachable through -p: not loopback inside the container, on the published port.
    expect(isLoopbackHost(config.host)).toBe(false);
    expect(config.port).toBe(published);
    // --read-only: nothing may want to write a dev signing key.
    if (config.authorizationServer) expect(config.authorizationServer.signingKey).toBeDefined();
    expect(config.publicUrl).toBe(env.PUBLIC_URL);
  });
});

describe('docs/idps', () => {
  /** Each page, the login kind its settings must have, and what its quirk sets. */
  const PAGES: [string, Record<string, unknown>][] = [
    ['keycloak.md', { kind: 'oidc', issuer: 'https://keycloak.example.com/realms/acme', sendResource: true, subjectClaim: 'sub' }],
    ['entra-id.md', { kind: 'oidc', sendResource: false, subjectClaim: 'oid' }],
    ['okta.md', { kind: 'oidc', issuer: 'https://acme.okta.com/oauth2/default' }],
    ['auth0.md', { kind: 'oidc', issuer: 'https://acme.us.auth0.com/', sendResource: false, extraAuthorizeParams: { audience: 'https://api.example.com' } }],
    ['google.md', { kind: 'oidc', extraAuthorizeParams: expect.objectContaining({ access_type: 'offline', prompt: 'consent' }) }],
    ['github.md', { kind: 'oauth2', subjectClaim: 'id', userinfoEndpoint: 'https://api.github.com/user' }],
  ];

  it.each(PAGES)('%s: the gateway settings load in a gateway.yaml, with the quirk set', async (page, login) => {
    const blocks = (await fencedBlocks(`docs/idps/${page}`, 'yaml')).filter(({ text }) => /^authorization_server:/m.test(text));
    expect(blocks).toHaveLength(1);
    const dir = await writeConfig(`idps-${page}`, {
      'gateway.yaml': `listen: { host: 0.0.0.0 }\npublic_url: https://mcp.example.com\n${blocks[0]!.text}`,
      'route.yaml': 'path: /mcp\nupstream: http://127.0.0.1:3000/mcp\n',
    });
    const config = await loadConfig(dir, SECRETS_ENV);
    expect(config.authorizationServer?.login).toMatchObject(login);
  });

  it("the login examples of docs/authorization-server.md (oidc with its quirks, oauth2) load in a gateway.yaml", async () => {
    const blocks = (await fencedBlocks('docs/authorization-server.md', 'yaml')).filter(({ text }) => /^\s+kind: (oidc|oauth2)$/m.test(text) && /^authorization_server:/m.test(text) && !/^public_url:/m.test(text));
    const kinds: string[] = [];
    for (const [i, { text }] of blocks.entries()) {
      const dir = await writeConfig(`as-login-${i}`, { 'gateway.yaml': `listen: { host: 0.0.0.0 }\npublic_url: https://mcp.example.com\n${text}`, 'route.yaml': 'path: /mcp\nupstream: http://127.0.0.1:3000/mcp\n' });
      kinds.push((await loadConfig(dir, SECRETS_ENV)).authorizationServer!.login.kind);
    }
    expect(kinds).toContain('oauth2');
    expect(kinds.filter((k) => k === 'oidc').length).toBeGreaterThanOrEqual(2);
  });

  it('every page is listed in docs/idps/README.md, and the README links it', async () => {
    const index = await readFile(join(REPO, 'docs/idps/README.md'), 'utf8');
    const readme = await readFile(join(REPO, 'README.md'), 'utf8');
    for (const [page] of PAGES) {
      expect(index).toContain(`](${page})`);
      expect(readme).toContain(`](docs/idps/${page})`);
    }
  });
});
