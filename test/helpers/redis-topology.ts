// Redis in production shapes, from the same redis-server binary on free
// loopback ports: a Sentinel-managed primary (with an optional replica, so a
// failover can be tested) and a three-primary Redis Cluster.
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './net.js';
import { startRedisServer, type RedisServer } from './redis-server.js';

const REDIS_SERVER = '/usr/bin/redis-server';
const REDIS_CLI = '/usr/bin/redis-cli';
const live = new Set<ChildProcess>();
process.once('exit', () => live.forEach((p) => p.kill('SIGKILL')));

/** One redis-cli command against 127.0.0.1:port; its stdout, trimmed. */
export async function redisCli(port: number, ...args: string[]): Promise<string> {
  const { stdout } = await promisify(execFile)(REDIS_CLI, ['-h', '127.0.0.1', '-p', String(port), ...args], { timeout: 10_000 });
  return stdout.trim();
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface SentinelSetup {
  masterName: string;
  primary: RedisServer;
  /** Present with `replica: true`: replicates the primary, promoted on failover. */
  replica?: RedisServer;
  sentinelPort: number;
  /** `redis+sentinel://127.0.0.1:<sentinel port>/<master name>` */
  url: string;
  /** host:port the Sentinel names as the current primary. */
  currentPrimary(): Promise<string>;
  /** The Sentinel's log so far (to explain a failover that did not happen). */
  log(): Promise<string>;
  stop(): Promise<void>;
}

/**
 * A primary, optionally a replica, and one Sentinel (quorum 1) monitoring
 * them, run as `redis-server <conf> --sentinel` (Debian's redis-sentinel is
 * that binary under another name). `downAfterMs`: how long the primary must
 * be silent before the Sentinel fails over.
 */
export async function startSentinel(options: { replica?: boolean; downAfterMs?: number; masterName?: string } = {}): Promise<SentinelSetup> {
  const masterName = options.masterName ?? 'mymaster';
  const primary = await startRedisServer();
  const replica = options.replica ? await startRedisServer(['--replicaof', '127.0.0.1', String(primary.port)]) : undefined;
  if (replica) await until('the replica to sync', async () => ((await redisCli(replica.port, 'INFO', 'replication')).includes('master_link_status:up') ? true : undefined));

  const dir = await mkdtemp(join(tmpdir(), 'mag-sentinel-'));
  const sentinelPort = await freePort();
  const conf = join(dir, 'sentinel.conf');
  await writeFile(
    conf,
    [
      `port ${sentinelPort}`,
      'bind 127.0.0.1',
      `dir ${dir}`,
      `logfile ${join(dir, 'sentinel.log')}`,
      `sentinel monitor ${masterName} 127.0.0.1 ${primary.port} 1`,
      `sentinel down-after-milliseconds ${masterName} ${options.downAfterMs ?? 1000}`,
      `sentinel failover-timeout ${masterName} 10000`,
      `sentinel parallel-syncs ${masterName} 1`,
      '',
    ].join('\n'),
  );
  const child = spawn(REDIS_SERVER, [conf, '--sentinel'], { stdio: 'ignore' });
  live.add(child);
  child.once('exit', () => live.delete(child));
  const currentPrimary = async () => (await redisCli(sentinelPort, 'SENTINEL', 'get-master-addr-by-name', masterName)).split('\n').join(':');
  await until('the Sentinel to answer', async () => ((await currentPrimary()) === `127.0.0.1:${primary.port}` ? true : undefined));
  // A loaded CI machine can stall the Sentinel's timer for over 2 s; it then enters TILT mode and
  // makes no decision for 30 s. The tests measure the gateway's store, not Sentinel's own guard.
  await redisCli(sentinelPort, 'SENTINEL', 'DEBUG', 'tilt-trigger', '60000', 'tilt-period', '1000');
  if (replica) {
    await until('the Sentinel to discover the replica', async () => ((await redisCli(sentinelPort, 'SENTINEL', 'replicas', masterName)).includes(String(replica.port)) ? true : undefined));
  }

  return {
    masterName,
    primary,
    replica,
    sentinelPort,
    url: `redis+sentinel://127.0.0.1:${sentinelPort}/${masterName}`,
    currentPrimary,
    log: () => readFile(join(dir, 'sentinel.log'), 'utf8').catch(() => ''),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = once(child, 'exit');
        child.kill('SIGTERM');
        await exited;
      }
      await Promise.all([primary.stop(), replica?.stop()]);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export interface ClusterSetup {
  nodes: RedisServer[];
  /** `redis+cluster://127.0.0.1:<p1>,127.0.0.1:<p2>,...` */
  url: string;
  stop(): Promise<void>;
}

/** `size` primaries, no replicas, every slot assigned (`redis-cli --cluster create`), state ok on every node. */
export async function startCluster(size = 3): Promise<ClusterSetup> {
  const dir = await mkdtemp(join(tmpdir(), 'mag-cluster-'));
  const nodes = await Promise.all(
    Array.from({ length: size }, (_, i) =>
      startRedisServer(['--cluster-enabled', 'yes', '--cluster-config-file', join(dir, `nodes-${i}.conf`), '--cluster-node-timeout', '5000']),
    ),
  );
  const addresses = nodes.map((n) => `127.0.0.1:${n.port}`);
  await promisify(execFile)(REDIS_CLI, ['--cluster', 'create', ...addresses, '--cluster-replicas', '0', '--cluster-yes'], { timeout: 30_000 });
  for (const node of nodes) {
    await until('cluster_state:ok', async () => ((await redisCli(node.port, 'CLUSTER', 'INFO')).includes('cluster_state:ok') ? true : undefined));
  }
  return {
    nodes,
    url: `redis+cluster://${addresses.join(',')}`,
    async stop() {
      await Promise.all(nodes.map((n) => n.stop()));
      await rm(dir, { recursive: true, force: true });
    },
  };
}
