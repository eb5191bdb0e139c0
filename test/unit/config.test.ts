import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { loadConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/config/config-error.js';
import { describeRoutes } from '../../src/config/describe.js';
import { parseDuration } from '../../src/config/duration.js';
import { gatewayJsonSchema } from '../../src/config/json-schema.js';

const GATEWAY = `listen: { host: 127.0.0.1, port: 9000 }
public_url: http://127.0.0.1:9000
authorization_server:
  enabled: true
`;
const ROUTE = `path: /a/mcp
upstream: http://127.0.0.1:3000/mcp
`;

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mag-config-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function write(files: Record<string, string>): Promise<void> {
  for (const [name, text] of Object.entries(files)) {
    await mkdir(dirname(join(dir, name)), { recursive: true });
    await writeFile(join(dir, name), text);
  }
}

/** The issues of a failed load, as `file:line:col: message` lines with the temp dir removed. */
async function loadErrors(env: NodeJS.ProcessEnv = {}): Promise<string[]> {
  const err = await loadConfig(dir, env).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  return (err as ConfigError).message.split('\n').map((line) => line.replace(`${dir}/`, ''));
}

describe('loadConfig', () => {
  it('loads a directory and applies defaults', async () => {
    await write({ 'gateway.yaml': GATEWAY, 'routes/a.yaml': ROUTE, 'b.yml': 'path: /b\nupstream: http://127.0.0.1:3001/mcp\n' });
    const config = await loadConfig(dir, {});
    expect(config).toMatchObject({
      host: '127.0.0.1',
      port: 9000,
      publicUrl: 'http://127.0.0.1:9000',
      store: { kind: 'memory', maxEntries: 100_000 },
      logLevel: 'info',
      shutdownGraceMs: 25_000,
      authorizationServer: { issuer: 'http://127.0.0.1:9000', accessTokenTtlMs: 600_000, login: { kind: 'dev' } },
      warnings: [],
    });
    // Sorted by relative path: b.yml before routes/a.yaml.
    expect(config.routes.map((r) => r.path)).toEqual(['/b', '/a/mcp']);
    expect(config.routes[1]).toMatchObject({
      file: join(dir, 'routes/a.yaml'),
      resource: 'http://127.0.0.1:9000/a/mcp',
      resourceMetadataUrl: 'http://127.0.0.1:9000/.well-known/oauth-protected-resource/a/mcp',
      authorizationServers: ['http://127.0.0.1:9000'],
      token: { kind: 'builtin' },
      requiredScopes: [],
      rules: [],
      maxBodyBytes: 4 * 1024 * 1024,
      upstreamTimeoutMs: 60_000,
      maxGetStreamsPerUser: 16,
      maxRequestsInFlightPerUser: 64,
      upstreamAuth: { kind: 'none' },
    });
  });

  it('reports an unknown key at its own line', async () => {
    await write({ 'gateway.yaml': GATEWAY, 'a.yaml': `${ROUTE}# comment\nrequired_scope: [mcp:read]\n` });
    expect(await loadErrors()).toEqual(['a.yaml:4:1: required_scope: unknown key (did you mean required_scopes?)']);
  });

  it('reports a bad value at the value, and collects issues from every file', async () => {
    await write({
      'gateway.yaml': GATEWAY.replace('port: 9000', 'port: 99999'),
      'a.yaml': `${ROUTE}limits:\n  upstream_timeout: 10 minutes\n`,
    });
    const errors = await loadErrors();
    expect(errors).toHaveLength(2);
    expect(errors[0]).toMatch(/^gateway\.yaml:1:34: listen\.port: /);
    expect(errors[1]).toMatch(/^a\.yaml:4:21: limits\.upstream_timeout: expected a duration/);
  });

  it('requires env secrets to be set, and rejects inline secrets', async () => {
    await write({
      'gateway.yaml': GATEWAY,
      'a.yaml': `${ROUTE}upstream_auth: { kind: static, value: { env: MISSING_PAT } }\n`,
      'b.yaml': 'path: /b\nupstream: http://127.0.0.1:3000/mcp\nupstream_auth:\n  kind: static\n  value: ghp_inline\n',
    });
    expect(await loadErrors()).toEqual([
      'a.yaml:3:39: upstream_auth.value: environment variable MISSING_PAT is not set or empty',
      'b.yaml:5:10: upstream_auth.value: a secret is never inline: write { env: NAME } or { file: path }',
    ]);
  });

  it('resolves secrets from env and from files relative to the config dir', async () => {
    await write({
      'gateway.yaml': GATEWAY,
      'pat.txt': 'tok-from-file\n',
      'a.yaml': `${ROUTE}upstream_auth: { kind: static, value: { file: pat.txt } }\n`,
      'b.yaml': 'path: /b\nupstream: http://127.0.0.1:3000/mcp\nupstream_auth: { kind: static, header: X-Api-Key, value: { env: KEY } }\n',
      'c.yaml': 'path: /c\nupstream: http://127.0.0.1:3000/mcp\nupstream_auth: { kind: static, value: { env: BASIC } }\n',
    });
    const config = await loadConfig(dir, { KEY: 'k1', BASIC: 'Basic dXNlcjpwYXNz' });
    expect(config.routes.map((r) => r.upstreamAuth)).toEqual([
      { kind: 'static', header: 'authorization', value: 'Bearer tok-from-file' },
      { kind: 'static', header: 'x-api-key', value: 'k1' },
      { kind: 'static', header: 'authorization', value: 'Basic dXNlcjpwYXNz' },
    ]);
  });

  it('refuses duplicate paths and resources at the second file', async () => {
    await write({
      'gateway.yaml': GATEWAY,
      'a.yaml': ROUTE,
      'b.yaml': ROUTE,
      'c.yaml': 'path: /c\nupstream: http://127.0.0.1:3000/mcp\nresource: HTTP://127.0.0.1:9000/a/mcp/\n',
    });
    const errors = await loadErrors();
    expect(errors).toEqual([
      `b.yaml:1:7: path: /a/mcp is already the path of the route in ${join(dir, 'a.yaml')}`,
      `c.yaml:3:11: resource: resource http://127.0.0.1:9000/a/mcp is already the resource of the route in ${join(dir, 'a.yaml')}`,
    ]);
  });

  it('refuses reserved paths', async () => {
    await write({
      'gateway.yaml': GATEWAY,
      'a.yaml': 'path: /token\nupstream: http://127.0.0.1:3000/mcp\n',
      'b.yaml': 'path: /.well-known/x\nupstream: http://127.0.0.1:3000/mcp\n',
    });
    expect(await loadErrors()).toEqual([
      "a.yaml:1:7: path: /token is reserved for the gateway's own endpoints",
      "b.yaml:1:7: path: /.well-known/x is reserved for the gateway's own endpoints",
    ]);
  });

  it('reports YAML syntax errors, duplicate keys and empty files with their line', async () => {
    await write({
      'gateway.yaml': GATEWAY,
      'a.yaml': `${ROUTE}filter_tools_list: true: false\n`,
      'b.yaml': `${ROUTE}path: /again\n`,
      'c.yaml': '# nothing here\n',
    });
    const errors = await loadErrors();
    expect(errors[0]).toMatch(/^a\.yaml:3:\d+: /);
    expect(errors.filter((e) => e.startsWith('b.yaml'))).toEqual([expect.stringMatching(/^b\.yaml:3:1: Map keys must be unique/)]);
    expect(errors.at(-1)).toBe('c.yaml:1:1: the file is empty');
  });

  it('refuses an alias bomb', async () => {
    const bomb = ['a: &a [x, x, x, x, x, x, x, x, x, x]', ...'bcdefg'.split('').map((k, i) => `${k}: &${k} [${Array(10).fill(`*${'abcdefg'[i]}`).join(', ')}]`)];
    await write({ 'gateway.yaml': GATEWAY, 'a.yaml': `${bomb.join('\n')}\n` });
    expect((await loadErrors())[0]).toMatch(/^a\.yaml:1:1: .*alias/i);
  });

  it('applies environment overrides and validates them', async () => {
    await write({ 'gateway.yaml': GATEWAY, 'a.yaml': ROUTE });
    const config = await loadConfig(dir, {
      PORT: '7000',
      HOST: '::1', // loopback: the dev login (the default) is refused elsewhere
      PUBLIC_URL: 'http://LOCALHOST:7000/',
      LOG_LEVEL: 'debug',
      REDIS_URL: 'redis://redis:6379/0',
    });
    expect(config).toMatchObject({
      host: '::1',
      port: 7000,
      publicUrl: 'http://localhost:7000',
      logLevel: 'debug',
      store: { kind: 'redis', url: 'redis://redis:6379/0', keyPrefix: 'mag:', commandTimeoutMs: 2000 },
    });
    expect(config.routes[0]?.resource).toBe('http://localhost:7000/a/mcp');
    expect(await loadErrors({ PORT: '80a', LOG_LEVEL: 'loud', PUBLIC_URL: 'ftp://x', REDIS_URL: 'http://r' })).toEqual([
      'env:PORT: expected a port number from 0 to 65535',
      'env:PUBLIC_URL: expected an http(s) URL',
      'env:LOG_LEVEL: expected one of fatal, error, warn, info, debug, trace, silent',
      'env:REDIS_URL: expected a redis:// or rediss:// URL',
    ]);
  });

  it('canonicalises resources and computes RFC 9728 metadata URLs', async () => {
    await write({
      'gateway.yaml': 'public_url: HTTPS://MCP.Example.com:443/gw\nauthorization_server: { login: { kind: oidc, issuer: https://idp.example.com, client_id: gw } }\n',
      'root.yaml': 'path: /\nupstream: https://up.example.com/mcp\n',
      'a.yaml': ROUTE,
    });
    const config = await loadConfig(dir, {});
    expect(config.publicUrl).toBe('https://mcp.example.com/gw');
    expect(config.authorizationServer?.issuer).toBe('https://mcp.example.com/gw');
    expect(config.routes.map((r) => [r.resource, r.resourceMetadataUrl])).toEqual([
      ['https://mcp.example.com/gw/a/mcp', 'https://mcp.example.com/.well-known/oauth-protected-resource/gw/a/mcp'],
      ['https://mcp.example.com/gw', 'https://mcp.example.com/.well-known/oauth-protected-resource/gw'],
    ]);
    // a.yaml's upstream is loopback http: no warning; nothing else is http.
    expect(config.warnings).toEqual([]);
  });

  it('requires authorization_servers and token without the built-in AS, and warns about remote http', async () => {
    await write({ 'gateway.yaml': 'public_url: https://mcp.example.com\n', 'a.yaml': 'path: /a\nupstream: http://10.0.0.5/mcp\n' });
    expect(await loadErrors()).toEqual([
      'a.yaml:1:1: authorization_servers is required without the built-in authorization server',
      'a.yaml:1:1: token is required without the built-in authorization server (token: { jwt: ... } or { introspection: ... })',
    ]);
    await write({
      'a.yaml':
        'path: /a\nupstream: http://10.0.0.5/mcp\nauthorization_servers: [https://idp.example.com]\ntoken: { jwt: { issuer: https://idp.example.com } }\n',
    });
    const config = await loadConfig(dir, {});
    expect(config.routes[0]?.token).toEqual({ kind: 'jwt', issuer: 'https://idp.example.com', jwksUri: undefined, algorithms: ['RS256', 'ES256'], clockSkewSeconds: 30 });
    expect(config.warnings).toEqual([`${join(dir, 'a.yaml')}:2:11: upstream: http://10.0.0.5/mcp is plain http to a non-loopback host`]);
  });

  it('[J51] refuses the dev login on a non-loopback public_url', async () => {
    await write({ 'gateway.yaml': 'listen: { host: 127.0.0.1 }\npublic_url: https://mcp.example.com\nauthorization_server:\n  login: { kind: dev }\n', 'a.yaml': ROUTE });
    expect(await loadErrors()).toEqual([
      'gateway.yaml:4:10: authorization_server.login: the dev login is refused unless public_url is loopback (127.0.0.0/8, ::1 or localhost); its host is mcp.example.com',
    ]);
  });

  it('[J51] refuses the dev login on a non-loopback listen address, the default 0.0.0.0 and a HOST override included', async () => {
    await write({ 'gateway.yaml': 'public_url: http://127.0.0.1:8080\nauthorization_server:\n  login: { kind: dev }\n', 'a.yaml': ROUTE });
    expect(await loadErrors()).toEqual([
      'gateway.yaml:3:10: authorization_server.login: the dev login is refused unless listen.host is loopback (127.0.0.0/8, ::1 or localhost); listen.host is 0.0.0.0',
    ]);
    await write({ 'gateway.yaml': 'listen: { host: 127.0.0.1 }\npublic_url: http://127.0.0.1:8080\nauthorization_server:\n  login: { kind: dev }\n' });
    await expect(loadConfig(dir, {})).resolves.toBeDefined();
    const viaEnv = (await loadConfig(dir, { HOST: '::' }).catch((e: unknown) => e)) as ConfigError;
    expect(viaEnv.issues.map((i) => i.message)).toEqual([expect.stringContaining('listen.host is ::')]);
  });

  it('loads a single file with inline routes, locating their issues', async () => {
    await write({ 'one.yaml': `${GATEWAY}routes:\n  - path: /x\n    upstream: http://127.0.0.1:3000/mcp\n  - path: /y\n    upstreem: x\n` });
    const err = await loadConfig(join(dir, 'one.yaml'), {}).catch((e: unknown) => e);
    expect((err as ConfigError).issues).toEqual([
      { file: join(dir, 'one.yaml'), line: 8, column: 5, message: 'routes[1].upstream: required, but missing' },
      { file: join(dir, 'one.yaml'), line: 9, column: 5, message: 'routes[1].upstreem: unknown key (did you mean upstream?)' },
    ]);
  });

  it('DPoP nonces: a route asking for them needs dpop_nonce_key or the built-in AS; the key is long; not with dpop: off', async () => {
    const jwtRoute = (token: string) => `path: /a\nupstream: http://127.0.0.1:3000/mcp\nauthorization_servers: [https://idp.example.com]\ntoken: { jwt: { issuer: https://idp.example.com }, ${token} }\n`;
    await write({ 'gateway.yaml': 'public_url: http://127.0.0.1:9000\n', 'a.yaml': jwtRoute('dpop: required, dpop_nonce: true') });
    expect(await loadErrors()).toEqual([
      'gateway.yaml:1:1: route /a has token.dpop_nonce: set dpop_nonce_key (a secret shared by every replica) or enable the built-in authorization server, whose signing key the nonces derive from',
    ]);
    await write({ 'gateway.yaml': 'public_url: http://127.0.0.1:9000\ndpop_nonce_key: { env: NONCE_KEY }\n' });
    expect(await loadErrors({ NONCE_KEY: 'too-short' })).toEqual(['gateway.yaml:2:17: dpop_nonce_key: the DPoP nonce key must be at least 32 characters (e.g. openssl rand -base64 32)']);
    const config = await loadConfig(dir, { NONCE_KEY: 'k'.repeat(32) });
    expect(config.dpopNonceKey).toBe('k'.repeat(32));
    expect(config.routes[0]?.dpop).toEqual({ required: true, htu: 'http://127.0.0.1:9000/a', nonce: true });
    await write({ 'a.yaml': jwtRoute('dpop: off, dpop_nonce: true') });
    expect((await loadErrors({ NONCE_KEY: 'k'.repeat(32) }))[0]).toMatch(/dpop_nonce: dpop_nonce needs dpop allowed or required/);
    // With the built-in AS, the nonces derive from its signing key; /token asks for them with authorization_server.dpop_nonce.
    await write({ 'gateway.yaml': `${GATEWAY}  dpop_nonce: true\n`, 'a.yaml': `${ROUTE}token: { dpop: required, dpop_nonce: true }\n` });
    const withAs = await loadConfig(dir, {});
    expect(withAs.authorizationServer?.dpopNonce).toBe(true);
    expect(withAs.dpopNonceKey).toBeUndefined();
    expect(withAs.routes[0]?.dpop?.nonce).toBe(true);
  });

  it('says so when the directory has no gateway.yaml', async () => {
    await write({ 'a.yaml': ROUTE });
    expect(await loadErrors()).toEqual(['gateway.yaml: the config directory has no gateway.yaml']);
  });
});

describe('the example policies/', () => {
  it('loads without errors or warnings, and check describes it', async () => {
    const config = await loadConfig('policies', {});
    expect(config.warnings).toEqual([]);
    expect(config.routes).toHaveLength(1);
    expect(config.routes[0]).toMatchObject({ path: '/everything/mcp', upstream: 'http://127.0.0.1:3001/mcp', requiredScopes: ['mcp:read'] });
    expect(describeRoutes(config)).toContain('/everything/mcp → http://127.0.0.1:3001/mcp');
  });
});

describe('parseDuration', () => {
  it('converts to milliseconds', () => {
    expect([parseDuration('500ms'), parseDuration('60s'), parseDuration('10m'), parseDuration('12h'), parseDuration('30d')]).toEqual([
      500, 60_000, 600_000, 43_200_000, 2_592_000_000,
    ]);
    expect(() => parseDuration('10 m')).toThrow();
  });
});

describe('schema/gateway.schema.json', () => {
  it('is in sync with the zod schema (run `npm run schema`)', async () => {
    const committed = await readFile(new URL('../../schema/gateway.schema.json', import.meta.url), 'utf8');
    expect(committed).toBe(JSON.stringify(gatewayJsonSchema(), null, 2) + '\n');
  });
});
