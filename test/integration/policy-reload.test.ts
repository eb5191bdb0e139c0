/**
 * Hot reload of the policy, through the real CLI process (`serve --config
 * <dir>`): a rule file edit applies without a restart; an invalid edit keeps
 * the last good configuration serving and logs `file:line`; SIGHUP reloads
 * what the file watcher cannot see (a secret file outside the directory); a
 * request in flight finishes under the configuration it started with.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeServer, freePort, listen } from '../helpers/net.js';
import { startOidcProvider, type OidcProviderHandle } from '../helpers/oidc-provider.js';
import { MCP_HEADERS, toolCall } from './policy-harness.js';

const CLI = new URL('../../src/cli.ts', import.meta.url).pathname;

/** A JSON-RPC upstream that answers every tools/call with the tool's name; `slow` waits for release(). */
async function startUpstream() {
  const calls: Array<{ name: string; authorization: string | undefined }> = [];
  const held: Array<() => void> = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const message = JSON.parse(Buffer.concat(chunks).toString()) as { id: number; params?: { name?: string } };
      const name = message.params?.name ?? '';
      calls.push({ name, authorization: req.headers['x-upstream-key'] as string | undefined });
      const answer = () =>
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result: { content: [{ type: 'text', text: `ran ${name}` }] } }));
      if (name === 'slow') held.push(answer);
      else answer();
    });
  });
  const port = await listen(server);
  return { url: `http://127.0.0.1:${port}/mcp`, calls, held, close: () => closeServer(server) };
}

let oidc: OidcProviderHandle;
let upstream: Awaited<ReturnType<typeof startUpstream>>;
let dir: string;
let secretDir: string;
let child: ChildProcess;
let url: string;
let token: string;
const logs: Array<Record<string, unknown>> = [];

function routeYaml(rules: string): string {
  return `# reload test route
path: /r/mcp
upstream: ${upstream.url}
authorization_servers: [${oidc.issuer}]
token:
  jwt: { issuer: "${oidc.issuer}", jwks_uri: "${oidc.jwksUri}", algorithms: [ES256] }
required_scopes: [mcp:read]
upstream_auth: { kind: static, header: X-Upstream-Key, value: { file: ${join(secretDir, 'upstream-key')} } }
rules:
${rules}
`;
}

const call = (name: string) =>
  fetch(url, { method: 'POST', headers: { ...MCP_HEADERS, authorization: `Bearer ${token}` }, body: JSON.stringify(toolCall(1, name)) });

async function eventually(check: () => Promise<boolean> | boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const logged = (msg: string, reason?: string) => logs.filter((l) => l.msg === msg && (reason === undefined || l.reason === reason));

beforeAll(async () => {
  oidc = await startOidcProvider({ resources: [], scopes: ['mcp:read', 'mcp:write'] });
  upstream = await startUpstream();
  dir = await mkdtemp(join(tmpdir(), 'mag-reload-'));
  secretDir = await mkdtemp(join(tmpdir(), 'mag-reload-secret-'));
  await writeFile(join(secretDir, 'upstream-key'), 'key-one');
  const port = await freePort();
  url = `http://127.0.0.1:${port}/r/mcp`;
  oidc.resources.add(url);
  await writeFile(join(dir, 'gateway.yaml'), `listen: { host: 127.0.0.1, port: ${port} }\npublic_url: http://127.0.0.1:${port}\nshutdown_grace: 1s\n`);
  await writeFile(join(dir, 'route.yaml'), routeYaml('  - { match: { method: tools/call, tool: "delete_*" }, require_scopes: [mcp:write] }'));
  token = await oidc.mintAccessToken({ resource: url, scope: 'mcp:read' });

  child = spawn(
    process.execPath,
    ['--import', 'tsx', '--input-type=module', '-e', `const { main } = await import(${JSON.stringify(CLI)}); process.exitCode = (await main(process.argv.slice(1))) ?? process.exitCode;`, '--', 'serve', '--config', dir],
    { env: { ...process.env, LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let buffered = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    buffered += chunk;
    const lines = buffered.split('\n');
    buffered = lines.pop()!;
    for (const line of lines) if (line.startsWith('{')) logs.push(JSON.parse(line) as Record<string, unknown>);
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  await eventually(async () => {
    if (child.exitCode !== null) throw new Error(`gateway exited: ${stderr}`);
    return fetch(new URL('/healthz', url)).then((r) => r.ok, () => false);
  }, 'the gateway to listen', 30_000);
});

afterAll(async () => {
  if (child && child.exitCode === null) {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
  }
  for (const release of upstream?.held ?? []) release();
  await Promise.all([upstream?.close(), oidc?.close()]);
  await Promise.all([dir && rm(dir, { recursive: true, force: true }), secretDir && rm(secretDir, { recursive: true, force: true })]);
});

describe('hot reload of the rules (CLI process)', () => {
  it('serves the rules it started with', async () => {
    expect((await call('echo')).status).toBe(200);
    expect((await call('delete_repo')).status).toBe(403);
    expect(upstream.calls.map((c) => c.name)).toEqual(['echo']);
  });

  it('applies an edited rule file without a restart', async () => {
    await writeFile(join(dir, 'route.yaml'), routeYaml('  - { match: { method: tools/call, tool: echo }, deny: true }'));
    await eventually(async () => (await call('echo')).status === 403, 'the new rule to apply');
    expect((await call('delete_repo')).status).toBe(200);
    expect(logged('configuration reloaded', 'file change').length).toBeGreaterThan(0);
    // The decision is audited with the rule's file:line.
    expect(logs.filter((l) => l.log === 'audit' && l.name === 'echo' && l.decision === 'deny').at(-1)).toMatchObject({ rule: `${join(dir, 'route.yaml')}:10` });
  });

  it('keeps the last good configuration on an invalid edit, logging file:line', async () => {
    // Line 10: `deny` may only be true.
    await writeFile(join(dir, 'route.yaml'), routeYaml('  - { match: { method: tools/call, tool: echo }, deny: false }'));
    await eventually(() => logged('invalid configuration ignored').length > 0, 'the invalid edit to be reported');
    const [report] = logged('invalid configuration ignored');
    expect((report!.issues as string[]).join('\n')).toContain(`${join(dir, 'route.yaml')}:10:`);
    expect((await call('echo')).status).toBe(403);
    expect((await call('delete_repo')).status).toBe(200);
    expect(child.exitCode).toBeNull();
  });

  it('reloads on SIGHUP what the file watcher cannot see (a secret file outside the directory)', async () => {
    // The file on disk is the invalid one: fix it first (the watcher loads it).
    const reloads = logged('configuration reloaded', 'file change').length;
    await writeFile(join(dir, 'route.yaml'), routeYaml('  - { match: { method: tools/call, tool: echo }, deny: true }'));
    await eventually(() => logged('configuration reloaded', 'file change').length > reloads, 'the fixed file to load');
    await writeFile(join(secretDir, 'upstream-key'), 'key-two');
    await new Promise((r) => setTimeout(r, 600));
    await call('ping-1');
    expect(upstream.calls.at(-1)).toEqual({ name: 'ping-1', authorization: 'key-one' });

    child.kill('SIGHUP');
    await eventually(() => logged('configuration reloaded', 'SIGHUP').length === 1, 'the SIGHUP reload');
    await call('ping-2');
    expect(upstream.calls.at(-1)).toEqual({ name: 'ping-2', authorization: 'key-two' });
  });

  it('lets a request in flight finish under the configuration it started with', async () => {
    const inFlight = call('slow');
    await eventually(() => upstream.held.length === 1, 'the slow call to reach the upstream');

    const reloads = logged('configuration reloaded').length;
    await writeFile(join(dir, 'route.yaml'), routeYaml('  - { match: { method: tools/call, tool: slow }, deny: true }'));
    // (Polling with `slow` itself would hang on the upstream until the rule applies.)
    await eventually(() => logged('configuration reloaded').length > reloads, 'the rule denying slow to load');
    expect((await call('slow')).status).toBe(403);
    expect(upstream.held.length).toBe(1);

    upstream.held.shift()!();
    const res = await inFlight;
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ result: { content: [{ text: 'ran slow' }] } });
  });

  it('follows edits made by renaming over the file (sed -i), one after another, and names the live configuration in /readyz and the metrics', async () => {
    const route = join(dir, 'route.yaml');
    const sedI = (script: string) => new Promise((resolve, reject) => execFile('sed', ['-i', script, route], (err) => (err ? reject(err) : resolve(undefined))));
    // The deny rule for `slow` (line 10) becomes one for `echo`, then for `ping`: each a rename over the watched file.
    await sedI('10s/tool: slow/tool: echo/');
    await eventually(async () => (await call('echo')).status === 403, 'the first sed -i edit to apply');
    await sedI('10s/tool: echo/tool: ping/');
    await eventually(async () => (await call('ping')).status === 403, 'the second sed -i edit to apply');
    expect((await call('echo')).status).toBe(200);

    const ready = (await (await fetch(new URL('/readyz', url))).json()) as { config: { hash: string; loaded_at: string } };
    const digest = createHash('sha256');
    for (const file of [join(dir, 'gateway.yaml'), route]) {
      const text = await readFile(file, 'utf8');
      digest.update(`${file}\0${text.length}\0${text}\0`);
    }
    expect(ready.config.hash).toBe(digest.digest('hex'));
    expect(Date.now() - Date.parse(ready.config.loaded_at)).toBeLessThan(60_000);
    expect(logged('configuration reloaded').at(-1)).toMatchObject({ hash: ready.config.hash });

    const metrics = await (await fetch(new URL('/metrics', url))).text();
    expect(metrics).toContain(`mag_config_info{hash="${ready.config.hash}"} 1`);
    expect(metrics).toMatch(/mag_config_reloads_total\{result="invalid"\} [1-9]/);
    expect(metrics).toMatch(/mag_config_reloads_total\{result="ok"\} [1-9]/);
    expect(metrics).toMatch(/mag_config_loaded_timestamp_seconds \d/);
  });

  it('re-reads on SIGHUP even when no file changed', async () => {
    const before = logged('configuration reloaded', 'SIGHUP').length;
    child.kill('SIGHUP');
    await eventually(() => logged('configuration reloaded', 'SIGHUP').length > before, 'the SIGHUP reload');
  });

  it('never logs the bearer token', () => {
    expect(JSON.stringify(logs)).not.toContain(token);
    expect(logs.length).toBeGreaterThan(5);
  });
});
