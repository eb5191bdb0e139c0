/**
 * Property tests of configuration loading (src/config/load.ts): random YAML text and random
 * documents (valid configurations with random values planted at schema paths) never crash the
 * loader — the outcome is a configuration or a ConfigError whose every issue is located at
 * `file:line:column` in a file that was loaded, printed one issue per line.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { ConfigError } from '../../../src/config/config-error.js';
import { loadConfig } from '../../../src/config/load.js';
import { fuzz } from './harness.js';

let dir: string;
let gatewayFile: string;
let routeFile: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mag-fuzz-config-'));
  gatewayFile = join(dir, 'gateway.yaml');
  routeFile = join(dir, 'route.yaml');
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const KEYS = [
  'listen', 'host', 'port', 'public_url', 'trust_proxy', 'store', 'kind', 'url', 'key_prefix', 'command_timeout', 'max_entries', 'audit', 'sink',
  'log_level', 'shutdown_grace', 'drain_delay', 'limits', 'header_timeout', 'request_timeout', 'keep_alive_timeout', 'max_header_bytes', 'store_timeout',
  'authorization_server', 'enabled', 'issuer', 'signing_key', 'env', 'file', 'access_token_ttl', 'refresh_token_ttl', 'default_resource', 'registration',
  'dynamic', 'client_id_metadata_documents', 'login', 'client_id', 'client_secret', 'scopes', 'clients', 'client_name', 'redirect_uris', 'grant_types',
  'routes', 'path', 'upstream', 'resource', 'authorization_servers', 'token', 'jwt', 'jwks_uri', 'algorithms', 'clock_skew', 'introspection', 'endpoint',
  'cache_ttl', 'scopes_supported', 'required_scopes', 'rules', 'match', 'method', 'tool', 'uri', 'prompt', 'deny', 'require_scopes', 'filter_tools_list',
  'cors', 'allowed_origins', 'max_body_bytes', 'upstream_timeout', 'upstream_auth', 'header', 'value', 'audience', 'token_endpoint', '__proto__', 'constructor',
];
const scalar = fc.oneof(
  fc.constantFrom('10s', '0s', '-1s', '1h', '99999999d', 'dev', 'oidc', 'redis', 'memory', 'static', 'signed', 'none', 'RS256', 'none', 'HS256', 'tools/call',
    'http://127.0.0.1:1/mcp', 'https://mcp.example.test', 'https://mcp.example.test/', 'javascript:alert(1)', 'redis://127.0.0.1:1/0', 'redis+sentinel://x',
    '/mcp', 'mcp', '/a/../b', '/healthz', '/authorize', '${HOME}', '/nonexistent/secret', '/etc/hostname', '.', '*', '**', 'delete_*', 'NOT_SET', ''),
  fc.string({ maxLength: 20 }),
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
);
const value: fc.Arbitrary<unknown> = fc.letrec<{ v: unknown }>((tie) => ({
  v: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    scalar,
    fc.array(tie('v'), { maxLength: 3 }),
    fc.dictionary(fc.oneof(fc.constantFrom(...KEYS), fc.string({ maxLength: 8 })), tie('v'), { maxKeys: 4 }),
  ),
})).v;

/** A valid configuration to start from, so random values reach the deeper checks. */
const validGateway = () => ({
  listen: { host: '127.0.0.1', port: 0 },
  public_url: 'http://127.0.0.1:8080',
  audit: { sink: 'none' },
  authorization_server: { enabled: true, login: { kind: 'dev' }, clients: [{ client_id: 'c', redirect_uris: ['https://app.example/cb'] }] },
});
const validRoute = () => ({ path: '/mcp', upstream: 'http://127.0.0.1:1/mcp', scopes_supported: ['mcp:read'], rules: [{ match: { method: 'tools/call', tool: 'x' }, deny: true }] });

/** Sets `v` at `path` inside `doc` as own properties (a `__proto__` key is data here, never the prototype). */
function plant(doc: Record<string, unknown>, path: string[], v: unknown): void {
  const own = (node: Record<string, unknown>, key: string, value: unknown) =>
    Object.defineProperty(node, key, { value, enumerable: true, writable: true, configurable: true });
  let node: Record<string, unknown> = doc;
  for (const key of path.slice(0, -1)) {
    let next = Object.hasOwn(node, key) ? node[key] : undefined;
    if (Array.isArray(next)) next = next[0];
    if (typeof next !== 'object' || next === null || Array.isArray(next)) {
      next = {};
      own(node, key, next);
    }
    node = next as Record<string, unknown>;
  }
  own(node, path.at(-1)!, v);
}
const mutation = fc.tuple(fc.array(fc.constantFrom(...KEYS), { minLength: 1, maxLength: 4 }), value);
const documents = fc.tuple(fc.array(mutation, { maxLength: 4 }), fc.array(mutation, { maxLength: 3 }), fc.boolean()).map(([gwMutations, routeMutations, withRoute]) => {
  const gateway = validGateway() as Record<string, unknown>;
  const route = validRoute() as Record<string, unknown>;
  for (const [path, v] of gwMutations) plant(gateway, path, v);
  for (const [path, v] of routeMutations) plant(route, path, v);
  return { gateway: stringify(gateway), route: withRoute ? stringify(route) : undefined };
});

const YAML_CHARS = [...'abcdefghijklmnopqrstuvwxyz_/.:0123456789', ' ', ' ', '\n', '\n', '\t', '-', ':', '{', '}', '[', ']', ',', '"', "'", '&', '*', '!', '#', '|', '>', '%', '@', '`', '?', '\\', '\r', '\u0000', '\ufeff', 'é', '<<', '---', '...', '!!binary ', '!!js/function ', '&a ', '*a', '<<: *a', 'public_url: ', 'routes:\n  - ', 'path: '];
const yamlText = fc.oneof(
  fc.array(fc.constantFrom(...YAML_CHARS), { maxLength: 80 }).map((parts) => parts.join('')),
  // A valid file with a few characters inserted, deleted or replaced.
  fc.tuple(fc.array(fc.tuple(fc.nat(), fc.nat(3), fc.constantFrom(...YAML_CHARS)), { minLength: 1, maxLength: 4 })).map(([edits]) => {
    let text = stringify(validGateway());
    for (const [at, del, insert] of edits) {
      const i = at % (text.length + 1);
      text = text.slice(0, i) + insert + text.slice(i + del);
    }
    return text;
  }),
  // Alias bombs.
  fc.integer({ min: 2, max: 12 }).map((n) => ['a: &a ["x","x"]', ...Array.from({ length: n }, (_, i) => `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)}]`)].join('\n')),
);

/** Loads what was written; a failure must be a located ConfigError. */
async function expectLoadedOrLocated(files: string[]): Promise<void> {
  try {
    await loadConfig(dir, {});
  } catch (err) {
    expectNoPrototypePollution();
    if (!(err instanceof ConfigError)) throw new Error(`the loader crashed: ${String(err)}`, { cause: err });
    expect(err.issues.length).toBeGreaterThan(0);
    for (const issue of err.issues) {
      expect(files).toContain(issue.file);
      expect(issue.line).toBeGreaterThanOrEqual(1);
      expect(issue.column).toBeGreaterThanOrEqual(1);
      expect(issue.message.trim()).not.toBe('');
    }
    const lines = err.message.split('\n');
    expect(lines).toHaveLength(err.issues.length);
    for (const line of lines) expect(line).toMatch(/^\/.+\.yaml:\d+:\d+: ./);
  }
  expectNoPrototypePollution();
}

/** A `__proto__` or `constructor` key in a file is data: Object.prototype gains nothing. */
function expectNoPrototypePollution(): void {
  const inherited: string[] = [];
  for (const key in {}) inherited.push(key);
  expect(inherited).toEqual([]);
}

describe('configuration loading', () => {
  fuzz(
    'config: random YAML text never crashes the loader; errors are ConfigErrors at file:line',
    () =>
      fc.asyncProperty(yamlText, fc.option(yamlText, { nil: undefined }), async (gateway, route) => {
        await writeFile(gatewayFile, gateway);
        await rm(routeFile, { force: true });
        if (route !== undefined) await writeFile(routeFile, route);
        await expectLoadedOrLocated(route === undefined ? [gatewayFile] : [gatewayFile, routeFile]);
      }),
    { numRuns: 300, longScale: 0.1 },
  );

  fuzz(
    'config: random documents never crash the loader; errors are ConfigErrors at file:line',
    () =>
      fc.asyncProperty(documents, async ({ gateway, route }) => {
        await writeFile(gatewayFile, gateway);
        await rm(routeFile, { force: true });
        if (route !== undefined) await writeFile(routeFile, route);
        await expectLoadedOrLocated(route === undefined ? [gatewayFile] : [gatewayFile, routeFile]);
      }),
    { numRuns: 300, longScale: 0.1 },
  );
});
