/**
 * The exact container command line from the manifests, run here: the
 * gateway container's command (node bin/mcp-auth-gateway.js serve --config
 * /etc/mcp-auth-gateway) in the image's working directory, with the rendered
 * ConfigMap written where the mount would be and the Deployment's
 * environment. Deviations, each for a reason: the config path (the mount
 * path does not exist here), PORT and HOST (8080 may be taken; listen on
 * loopback only), the Redis host (a local redis-server with the same
 * password). Then once more with the route's IdP and upstream pointed at
 * local stand-ins, so a real authorised request goes through.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { buildGatewayCli, spawnGateway, type GatewayCli, type GatewayProcess } from '../helpers/gateway-process.js';
import { TEST_SECRETS, containerEnv, renderWithKubectl, type EnvVar, type K8sObject } from '../helpers/kustomize.js';
import { startLocalIssuer, type LocalIssuer } from '../helpers/local-issuer.js';
import { freePort } from '../helpers/net.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/scripted-upstream.js';

const REPO = resolve(import.meta.dirname, '../..');
const OVERLAYS = ['sidecar', 'standalone'] as const;
type Overlay = (typeof OVERLAYS)[number];

interface Container {
  name: string;
  command: string[];
  workingDir: string;
  env: EnvVar[];
}

function manifest(overlay: Overlay) {
  const objects = renderWithKubectl(join(REPO, 'deploy/kubernetes/overlays', overlay));
  const deployment = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === 'mcp-auth-gateway') as K8sObject & {
    spec: { template: { spec: { containers: Container[]; volumes: Array<{ name: string; configMap?: { name: string } }> } } };
  };
  const container = deployment.spec.template.spec.containers.find((c) => c.name === 'gateway')!;
  const configMap = objects.find((o) => o.kind === 'ConfigMap') as K8sObject & { data: Record<string, string> };
  return { container, files: configMap.data };
}

let cli: GatewayCli;
let redis: RedisServer;
let issuer: LocalIssuer;
let upstream: ScriptedUpstream;
const running: GatewayProcess[] = [];
const dirs: string[] = [];

beforeAll(async () => {
  [cli, redis, issuer, upstream] = await Promise.all([buildGatewayCli(), startRedisServer(), startLocalIssuer(), startScriptedUpstream()]);
  // The standalone Redis requires the password from the Secret.
  const admin = new Redis(redis.url);
  await admin.config('SET', 'requirepass', TEST_SECRETS['mcp-auth-gateway-redis/password']!);
  admin.disconnect();
});

afterAll(async () => {
  await Promise.all(running.map((p) => p.stop()));
  await Promise.all([issuer?.close(), upstream?.close(), ...dirs.map((d) => rm(d, { recursive: true, force: true }))]);
  await redis?.stop();
});

/** Runs the container's command with the config files at a local stand-in for the mount path. */
async function runContainerCommand(overlay: Overlay, files: Record<string, string>): Promise<{ gateway: GatewayProcess; env: Record<string, string> }> {
  const { container } = manifest(overlay);
  const configDir = await mkdtemp(join(tmpdir(), `mag-mount-${overlay}-`));
  dirs.push(configDir);
  for (const [name, text] of Object.entries(files)) await writeFile(join(configDir, name), text);

  expect(container.command[0]).toBe('node');
  expect(container.workingDir).toBe('/app'); // the CLI root stands in for the image's /app
  const mountPath = container.command[container.command.indexOf('--config') + 1]!;
  const args = container.command.slice(1).map((arg) => (arg === mountPath ? configDir : arg));
  const env = containerEnv(container.env, TEST_SECRETS);
  if (env.REDIS_URL) {
    const url = new URL(env.REDIS_URL);
    url.hostname = '127.0.0.1';
    url.port = String(redis.port);
    env.REDIS_URL = url.href;
  }
  const gateway = await spawnGateway(cli, { args, env: { ...env, HOST: '127.0.0.1', PORT: String(await freePort()) } });
  running.push(gateway);
  return { gateway, env };
}

describe.each(OVERLAYS)('%s: the container command line', (overlay) => {
  it('starts with the manifests as written and answers /healthz, /readyz, metadata and the 401 challenge', async () => {
    const { gateway, env } = await runContainerCommand(overlay, manifest(overlay).files);
    const healthz = await fetch(`${gateway.url}/healthz`);
    expect(healthz.status).toBe(200);
    const readyz = await fetch(`${gateway.url}/readyz`);
    expect(readyz.status).toBe(200);
    expect(await readyz.json()).toMatchObject({ status: 'ready', store: 'ok' });

    const resource = `${env.PUBLIC_URL}/mcp`;
    const metadataUrl = `${env.PUBLIC_URL}/.well-known/oauth-protected-resource/mcp`;
    const metadata = await fetch(`${gateway.url}/.well-known/oauth-protected-resource/mcp`);
    expect(await metadata.json()).toMatchObject({ resource, authorization_servers: ['https://idp.example.com'] });
    const challenge = await fetch(`${gateway.url}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(challenge.status).toBe(401);
    expect(challenge.headers.get('www-authenticate')).toContain(`resource_metadata="${metadataUrl}"`);
    await gateway.stop();
  });

  it('serves an authorised request from an upstream on localhost (IdP and upstream pointed at local stand-ins)', async () => {
    const { files } = manifest(overlay);
    const route = parse(files['mcp.yaml']!) as { upstream: string; authorization_servers: string[]; token: { jwt: Record<string, unknown> } };
    route.upstream = upstream.url;
    route.authorization_servers = [issuer.issuer];
    route.token.jwt = { ...route.token.jwt, issuer: issuer.issuer, jwks_uri: issuer.jwksUri };
    const { gateway, env } = await runContainerCommand(overlay, { ...files, 'mcp.yaml': stringify(route) });

    const token = await issuer.token({ audience: `${env.PUBLIC_URL}/mcp`, scope: 'mcp:read' });
    const received = upstream.headers.length;
    const res = await fetch(`${gateway.url}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/list', params: {} }),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ id: 7, result: { method: 'tools/list' } });
    const upstreamSaw = upstream.headers[received]!;
    expect(JSON.stringify(upstreamSaw)).not.toContain(token); // never the client's token
    // The standalone route sends the upstream credential from its Secret; the sidecar sends none.
    expect(upstreamSaw.authorization).toBe(overlay === 'standalone' ? `Bearer ${TEST_SECRETS['mcp-auth-gateway-upstream/token']}` : undefined);
    await gateway.stop();
  });
});
