/**
 * stdio processes and the gateway's own life: none is left behind when a gateway process gets
 * SIGTERM with children running, sandboxed or not, nor when it is SIGKILLed with sandboxed
 * children (bubblewrap's --die-with-parent); a gateway without bwrap refuses a sandboxed route
 * at check and at start; a reload keeps the processes of a route it leaves unchanged
 * and stops those of a route it removes.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { buildGatewayCli, spawnGateway, writeConfigDir } from '../helpers/gateway-process.js';
import { gatewayYaml } from '../helpers/gateway-config.js';
import { startLocalIssuer } from '../helpers/local-issuer.js';
import { descendantsOf } from '../helpers/process-tree.js';
import { FIXTURE_SERVER, isAlive, startStdioStage, waitFor } from '../helpers/stdio-stage.js';

const INITIALIZE = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };
const REPORT = { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'report', arguments: {} } };

async function post(url: string, token: string, body: unknown, sessionId?: string): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json', ...(sessionId && { 'mcp-session-id': sessionId }) },
    body: JSON.stringify(body),
  });
}

/** A new session on `url`; its id and its process id. */
async function session(url: string, token: string): Promise<{ id: string; pid: number }> {
  const id = (await post(url, token, INITIALIZE)).headers.get('mcp-session-id')!;
  const answer = (await (await post(url, token, REPORT, id)).json()) as { result: { content: { text: string }[] } };
  return { id, pid: (JSON.parse(answer.result.content[0]!.text) as { pid: number }).pid };
}

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
});

describe('no child outlives the gateway', () => {
  // Compiling the CLI takes a while on a busy machine; the test's own clock starts after it.
  beforeAll(() => buildGatewayCli(), 300_000);

  it('SIGTERM of a gateway process with children running (one mid-call): it exits and every child is gone', async () => {
    const [cli, issuer] = await Promise.all([buildGatewayCli(), startLocalIssuer()]);
    cleanups.push(() => issuer.close());
    const configDir = await writeConfigDir({
      'gateway.yaml': gatewayYaml({ listen: { host: '127.0.0.1', port: 0 }, public_url: 'http://127.0.0.1:1', shutdown_grace: '2s', drain_delay: '100ms', log_level: 'info' }),
      'probe.yaml': {
        path: '/mcp',
        upstream: { stdio: { command: process.execPath, args: [FIXTURE_SERVER, 'probe'] } },
        authorization_servers: [issuer.issuer],
        token: { jwt: { issuer: issuer.issuer, jwks_uri: issuer.jwksUri, algorithms: ['ES256'] } },
      },
    });
    cleanups.push(() => rm(configDir, { recursive: true, force: true }));
    const gateway = await spawnGateway(cli, { configDir });
    cleanups.push(() => gateway.stop());
    const url = `${gateway.url}/mcp`;
    const token = await issuer.token({ audience: 'http://127.0.0.1:1/mcp' });
    const sessions = await Promise.all([session(url, token), session(url, token), session(url, token)]);
    const pids = sessions.map((s) => s.pid);
    expect(pids.every(isAlive)).toBe(true);
    const midCall = post(url, token, { ...REPORT, params: { name: 'sleep', arguments: { ms: 60_000 } } }, sessions[0]!.id).catch(() => undefined);
    gateway.child.kill('SIGTERM');
    const exit = await gateway.exited;
    expect(exit.code).toBe(0);
    await midCall;
    await waitFor(() => pids.every((pid) => !isAlive(pid)), 5_000, 'every child to be gone');
  }, 60_000);
});

describe('a sandboxed route (bubblewrap; .ci/run installs it) and the gateway process', () => {
  beforeAll(() => buildGatewayCli(), 300_000);

  /** A gateway process with one sandboxed fixture route, three sessions open, and every process below it on the host. */
  async function sandboxedGateway() {
    const [cli, issuer] = await Promise.all([buildGatewayCli(), startLocalIssuer()]);
    cleanups.push(() => issuer.close());
    const configDir = await writeConfigDir({
      'gateway.yaml': gatewayYaml({ listen: { host: '127.0.0.1', port: 0 }, public_url: 'http://127.0.0.1:1', shutdown_grace: '2s', drain_delay: '100ms', log_level: 'info' }),
      'probe.yaml': {
        path: '/mcp',
        upstream: { stdio: { command: process.execPath, args: [FIXTURE_SERVER, 'probe'], sandbox: { kind: 'bubblewrap', readable: [dirname(FIXTURE_SERVER), dirname(process.execPath)] } } },
        authorization_servers: [issuer.issuer],
        token: { jwt: { issuer: issuer.issuer, jwks_uri: issuer.jwksUri, algorithms: ['ES256'] } },
      },
    });
    cleanups.push(() => rm(configDir, { recursive: true, force: true }));
    const gateway = await spawnGateway(cli, { configDir });
    cleanups.push(() => gateway.stop());
    const url = `${gateway.url}/mcp`;
    const token = await issuer.token({ audience: 'http://127.0.0.1:1/mcp' });
    const sessions = await Promise.all([session(url, token), session(url, token), session(url, token)]);
    // In its namespace the server is pid 2; on the host it is bwrap, bwrap's init and the server, per session.
    const tree = descendantsOf(gateway.child.pid!);
    expect(tree.length).toBeGreaterThanOrEqual(9);
    return { cli, configDir, gateway, url, token, sessions, tree };
  }

  it('SIGTERM with sandboxed children (one mid-call): the gateway exits 0 and every process of every sandbox is gone', async () => {
    const { gateway, url, token, sessions, tree } = await sandboxedGateway();
    const midCall = post(url, token, { ...REPORT, params: { name: 'sleep', arguments: { ms: 60_000 } } }, sessions[0]!.id).catch(() => undefined);
    gateway.child.kill('SIGTERM');
    expect((await gateway.exited).code).toBe(0);
    await midCall;
    await waitFor(() => tree.every((pid) => !isAlive(pid)), 5_000, 'every sandboxed process to be gone');
  }, 60_000);

  it('SIGKILL of the gateway (no exit hook runs): every process of every sandbox still goes, one mid-call too', async () => {
    const { gateway, url, token, sessions, tree } = await sandboxedGateway();
    void post(url, token, { ...REPORT, params: { name: 'sleep', arguments: { ms: 60_000 } } }, sessions[0]!.id).catch(() => undefined);
    gateway.child.kill('SIGKILL');
    await gateway.exited;
    await waitFor(() => tree.every((pid) => !isAlive(pid)), 5_000, 'every sandboxed process to be gone');
  }, 60_000);

  it('without bwrap in its PATH, check and serve exit 1 naming the package to install', async () => {
    const cli = await buildGatewayCli();
    const configDir = await writeConfigDir({
      'gateway.yaml': gatewayYaml({ listen: { host: '127.0.0.1', port: 0 }, public_url: 'http://127.0.0.1:1' }),
      'probe.yaml': {
        path: '/mcp',
        upstream: { stdio: { command: process.execPath, args: [FIXTURE_SERVER], sandbox: { kind: 'bubblewrap' } } },
        authorization_servers: ['https://issuer.example'],
        token: { jwt: { issuer: 'https://issuer.example', jwks_uri: 'https://issuer.example/jwks' } },
      },
    });
    const noBwrap = await mkdtemp(join(tmpdir(), 'mag-no-bwrap-'));
    cleanups.push(() => rm(configDir, { recursive: true, force: true }), () => rm(noBwrap, { recursive: true, force: true }));
    for (const command of ['check', 'serve']) {
      const run = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
        execFile(process.execPath, ['bin/mcp-auth-gateway.js', command, '--config', configDir], { cwd: cli.root, env: { PATH: noBwrap }, timeout: 30_000 }, (err, _out, stderr) =>
          resolve({ code: err ? ((err as { code?: number }).code ?? null) : 0, stderr }),
        );
      });
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(/probe\.yaml: \/mcp: upstream\.stdio\.sandbox: bubblewrap is not installed \(no bwrap in the PATH\): install the package bubblewrap/);
    }
  }, 60_000);
});

describe('reload', () => {
  it('keeps the processes of an unchanged route and stops those of a removed one', async () => {
    const stage = await startStdioStage({
      '/kept/mcp': { upstream: { stdio: { command: process.execPath, args: [FIXTURE_SERVER, 'probe'] } } },
      '/dropped/mcp': { upstream: { stdio: { command: process.execPath, args: [FIXTURE_SERVER, 'probe'] } } },
    });
    cleanups.push(() => stage.close());
    await stage.gw.writeConfig({ 'gateway.yaml': gatewayYaml({ log_level: 'info', shutdown_grace: '200ms' }) });
    await stage.gw.reload(await loadConfig(stage.gw.dir, {}));
    const kept = await session(stage.url('/kept/mcp'), await stage.token('/kept/mcp'));
    const dropped = await session(stage.url('/dropped/mcp'), await stage.token('/dropped/mcp'));
    const keptToken = await stage.token('/kept/mcp');
    await rm(join(stage.gw.dir, 'route-1.yaml'));
    await stage.gw.reload(await loadConfig(stage.gw.dir, {}));
    await waitFor(() => !isAlive(dropped.pid), 5_000, "the removed route's process to stop");
    expect(isAlive(kept.pid)).toBe(true);
    const again = (await (await post(stage.url('/kept/mcp'), keptToken, REPORT, kept.id)).json()) as { result: { content: { text: string }[] } };
    expect((JSON.parse(again.result.content[0]!.text) as { pid: number }).pid).toBe(kept.pid);
  });
});
