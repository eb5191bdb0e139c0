// `store.require_noeviction`, through the real command line: under any
// maxmemory-policy but noeviction Redis may evict a revocation or a replay
// guard, so the gateway refuses to start (true) or starts and logs an error
// (false, the default). A policy it cannot read (CONFIG disabled, Redis
// unreachable) is "not verified": refused when required, a warning otherwise.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gatewayYaml } from '../helpers/gateway-config.js';
import { buildGatewayCli, jwtRouteYaml, spawnGateway, writeConfigDir, type GatewayCli, type GatewayProcess } from '../helpers/gateway-process.js';
import { startLocalIssuer, type LocalIssuer } from '../helpers/local-issuer.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { startSentinel, type SentinelSetup } from '../helpers/redis-topology.js';

const PUBLIC_URL = 'http://127.0.0.1:18083';
const ERROR = 50;
const WARN = 40;

let cli: GatewayCli;
let issuer: LocalIssuer;
let lru: RedisServer;
let noConfig: RedisServer;
let noeviction: RedisServer;
let sentinel: SentinelSetup;
const running: GatewayProcess[] = [];

beforeAll(async () => {
  [cli, issuer, lru, noConfig, noeviction, sentinel] = await Promise.all([
    buildGatewayCli(),
    startLocalIssuer(),
    startRedisServer(['--maxmemory-policy', 'allkeys-lru']),
    startRedisServer(['--rename-command', 'CONFIG', '']),
    startRedisServer(),
    startSentinel(),
  ]);
});

afterAll(async () => {
  await Promise.all(running.map((p) => p.stop()));
  await Promise.all([issuer?.close(), lru?.stop(), noConfig?.stop(), noeviction?.stop(), sentinel?.stop()]);
});

async function start(url: string, require?: boolean): Promise<{ gateway?: GatewayProcess; error?: string }> {
  const configDir = await writeConfigDir({
    'gateway.yaml': gatewayYaml({
      public_url: PUBLIC_URL,
      log_level: 'info',
      store: { kind: 'redis', url, command_timeout: '500ms', ...(require !== undefined && { require_noeviction: require }) },
    }),
    'mcp.yaml': jwtRouteYaml('http://127.0.0.1:9/mcp', issuer),
  });
  try {
    const gateway = await spawnGateway(cli, { configDir });
    running.push(gateway);
    return { gateway };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

const policyLines = (gateway: GatewayProcess) => gateway.logs.filter((l) => /maxmemory-policy/.test(l.msg));

describe('store.require_noeviction', () => {
  it('true: refuses to start on an evicting Redis, naming the policy', async () => {
    const { gateway, error } = await start(lru.url, true);
    expect(gateway).toBeUndefined();
    expect(error).toMatch(/gateway exited \(1\) before listening/);
    expect(error).toMatch(/maxmemory-policy is allkeys-lru, not noeviction.*refusing to start/);
  });

  it('default false: starts on an evicting Redis and logs an error', async () => {
    const { gateway, error } = await start(lru.url);
    expect(error).toBeUndefined();
    expect(policyLines(gateway!)).toEqual([expect.objectContaining({ level: ERROR, policy: 'allkeys-lru' })]);
    expect((await fetch(`${gateway!.url}/readyz`)).status).toBe(200);
  });

  it('true: refuses when the policy cannot be read (CONFIG disabled); false: a warning', async () => {
    const refused = await start(noConfig.url, true);
    expect(refused.error).toMatch(/cannot verify that Redis maxmemory-policy is noeviction: CONFIG GET is disabled.*refusing to start/);
    const started = await start(noConfig.url, false);
    expect(started.error).toBeUndefined();
    expect(policyLines(started.gateway!)).toEqual([expect.objectContaining({ level: WARN, reason: 'CONFIG GET is disabled on this Redis' })]);
  });

  it('true: refuses when Redis cannot be reached at start-up, within the command timeout', async () => {
    const startedAt = performance.now();
    const { error } = await start('redis://127.0.0.1:1', true);
    expect(error).toMatch(/cannot verify .*Redis did not answer.*refusing to start/);
    expect(performance.now() - startedAt).toBeLessThan(5_000);
  });

  it('true: starts on a noeviction Redis, standalone or through Sentinel, without a word about the policy', async () => {
    for (const url of [noeviction.url, sentinel.url]) {
      const { gateway, error } = await start(url, true);
      expect(error).toBeUndefined();
      expect(policyLines(gateway!)).toEqual([]);
      expect(await (await fetch(`${gateway!.url}/readyz`)).json()).toMatchObject({ store: 'ok' });
    }
  });
});
