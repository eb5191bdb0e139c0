/**
 * Two gateway processes on one real redis-server, as the standalone
 * deployment runs them (issue 5, items 2 and 4):
 * - a session created through one replica is bound across both: the same
 *   principal passes through the other, any other principal gets 404;
 * - a rolling restart under load behind a round-robin balancer that, like a
 *   Kubernetes Service, stops routing to a replica once its /readyz is 503:
 *   zero failed requests, including those in flight when SIGTERM arrived.
 */
import { Agent, createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gatewayYaml } from '../helpers/gateway-config.js';
import { buildGatewayCli, jwtRouteYaml, spawnGateway, writeConfigDir, type GatewayCli, type GatewayProcess } from '../helpers/gateway-process.js';
import { startLocalIssuer, type LocalIssuer } from '../helpers/local-issuer.js';
import { closeServer, listen } from '../helpers/net.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/scripted-upstream.js';

const PUBLIC_URL = 'http://127.0.0.1:18081';
const RESOURCE = `${PUBLIC_URL}/mcp`;
const DRAIN_DELAY_MS = 1_000;
const READINESS_PERIOD_MS = 100;
/** As a Kubernetes readiness probe: a 503 counts at once, timeouts and errors only after this many in a row. */
const READINESS_FAILURE_THRESHOLD = 3;

let cli: GatewayCli;
let redis: RedisServer;
let issuer: LocalIssuer;
let upstream: ScriptedUpstream;
let configDir: string;
const processes: GatewayProcess[] = [];

beforeAll(async () => {
  [cli, redis, issuer, upstream] = await Promise.all([buildGatewayCli(), startRedisServer(), startLocalIssuer(), startScriptedUpstream({ sessions: true })]);
  configDir = await writeConfigDir({
    'gateway.yaml': gatewayYaml({ public_url: PUBLIC_URL, log_level: 'info', store: { kind: 'redis', url: redis.url, key_prefix: 'replicas:' }, drain_delay: `${DRAIN_DELAY_MS}ms`, shutdown_grace: '3s' }),
    'mcp.yaml': jwtRouteYaml(upstream.url, issuer),
  });
});

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  await Promise.all([issuer?.close(), upstream?.close()]);
  await redis?.stop();
});

async function replica(): Promise<GatewayProcess> {
  const gateway = await spawnGateway(cli, { configDir });
  processes.push(gateway);
  return gateway;
}

const rpc = (method: string, id = 1) => JSON.stringify({ jsonrpc: '2.0', id, method, params: {} });

async function post(url: string, token: string, body: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${url}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body,
  });
  return { status: res.status, sessionId: res.headers.get('mcp-session-id'), body: await res.text() };
}

describe('session binding across replicas sharing Redis', () => {
  it('a session created through A passes through B for the same principal and is 404 for any other', async () => {
    const [a, b] = await Promise.all([replica(), replica()]);
    const alice = await issuer.token({ audience: RESOURCE, sub: 'alice', clientId: 'app' });
    const bob = await issuer.token({ audience: RESOURCE, sub: 'bob', clientId: 'app' });
    const aliceOtherClient = await issuer.token({ audience: RESOURCE, sub: 'alice', clientId: 'other-app' });

    const init = await post(a.url, alice, rpc('initialize'));
    expect(init.status).toBe(200);
    const sessionId = init.sessionId!;
    expect(sessionId).toMatch(/^[0-9a-f-]{36}$/);
    const withSession = { 'mcp-session-id': sessionId };

    expect((await post(b.url, alice, rpc('tools/list'), withSession)).status).toBe(200);
    const before = upstream.methods.length;
    for (const gateway of [a, b]) {
      for (const intruder of [bob, aliceOtherClient]) {
        const refused = await post(gateway.url, intruder, rpc('tools/list'), withSession);
        expect(refused.status).toBe(404);
        expect(JSON.parse(refused.body)).toMatchObject({ error: 'not_found' });
      }
    }
    expect(upstream.methods.length).toBe(before); // nothing reached the upstream
    expect((await post(a.url, alice, rpc('tools/list'), withSession)).status).toBe(200);
  });
});

/** A round-robin HTTP balancer over replicas that routes only to those whose /readyz answered 200 last. */
class Balancer {
  private readonly backends: Array<{ url: string; ready: boolean; failures: number; agent: Agent }> = [];
  private next = 0;
  private polling: NodeJS.Timeout | undefined;
  server!: Server;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((req, res) => this.route(req, res));
    this.url = `http://127.0.0.1:${await listen(this.server)}`;
    this.polling = setInterval(() => void this.poll(), READINESS_PERIOD_MS);
  }

  /** A new replica is routed to only once it has been seen ready, as with a readiness probe. */
  add(url: string): void {
    this.backends.push({ url, ready: false, failures: 0, agent: new Agent({ keepAlive: true, maxSockets: 32 }) });
  }

  remove(url: string): void {
    const i = this.backends.findIndex((b) => b.url === url);
    if (i >= 0) this.backends.splice(i, 1)[0]!.agent.destroy();
  }

  ready(url: string): boolean {
    return this.backends.some((b) => b.url === url && b.ready);
  }

  async stop(): Promise<void> {
    clearInterval(this.polling);
    this.backends.forEach((b) => b.agent.destroy());
    await closeServer(this.server);
  }

  private async poll(): Promise<void> {
    await Promise.all(
      this.backends.map(async (backend) => {
        const status = await new Promise<number | undefined>((resolve) => {
          const req = request(`${backend.url}/readyz`, { agent: false, timeout: 1_000 }, (res) => {
            res.resume();
            resolve(res.statusCode);
          });
          req.once('error', () => resolve(undefined));
          req.once('timeout', () => req.destroy());
          req.end();
        });
        if (status === undefined) {
          if (++backend.failures >= READINESS_FAILURE_THRESHOLD) backend.ready = false;
        } else {
          backend.failures = 0;
          backend.ready = status === 200;
        }
      }),
    );
  }

  private route(req: IncomingMessage, res: ServerResponse): void {
    const ready = this.backends.filter((b) => b.ready);
    const backend = ready[this.next++ % Math.max(ready.length, 1)];
    if (!backend) {
      res.writeHead(599).end('no ready backend');
      return;
    }
    const headers = { ...req.headers, 'x-served-by': backend.url };
    delete headers.connection;
    const out = request(`${backend.url}${req.url}`, { method: req.method, headers, agent: backend.agent }, (upstreamRes) => {
      res.writeHead(upstreamRes.statusCode ?? 502, { ...upstreamRes.headers, connection: 'keep-alive', 'x-served-by': backend.url });
      upstreamRes.pipe(res);
    });
    // A failed hop is a failed request for the client: the test counts it.
    out.once('error', (err) => {
      if (!res.headersSent) res.writeHead(598, { 'x-served-by': backend.url }).end(`balancer: ${err.message}`);
      else res.destroy();
    });
    req.pipe(out);
  }
}

interface Outcome {
  backend: string;
  start: number;
  end: number;
  status: number;
  error?: string;
}

/** `workers` clients, each sending POSTs back to back until `until()` is true (and at most `max` in all). */
async function load(url: string, token: string, workers: number, until: () => boolean, max: number): Promise<Outcome[]> {
  const outcomes: Outcome[] = [];
  const agent = new Agent({ keepAlive: true, maxSockets: workers });
  const one = (id: number) =>
    new Promise<Outcome>((resolve) => {
      const start = performance.now();
      const body = rpc('tools/list', id);
      const req = request(
        `${url}/mcp`,
        {
          method: 'POST',
          agent,
          headers: {
            authorization: `Bearer ${token}`,
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            'x-test-delay-ms': String(20 + (id % 7) * 20), // 20–140 ms: requests are always in flight
            'content-length': String(Buffer.byteLength(body)),
          },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
          res.once('end', () => {
            const ok = res.statusCode === 200 && (JSON.parse(text) as { id?: number }).id === id;
            const outcome: Outcome = { backend: String(res.headers['x-served-by']), start, end: performance.now(), status: ok ? 200 : (res.statusCode ?? 0) };
            resolve(ok ? outcome : { ...outcome, error: text.slice(0, 200) });
          });
          res.once('error', (err) => resolve({ backend: String(res.headers['x-served-by']), start, end: performance.now(), status: 0, error: err.message }));
        },
      );
      req.once('error', (err) => resolve({ backend: '?', start, end: performance.now(), status: 0, error: err.message }));
      req.end(body);
    });
  let sent = 0;
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (!until() && sent < max) outcomes.push(await one(++sent));
    }),
  );
  agent.destroy();
  return outcomes;
}

describe('rolling restart of two replicas under load', () => {
  it('loses no request, including those in flight on the replica being drained', async () => {
    const balancer = new Balancer();
    await balancer.start();
    let a = await replica();
    let b = await replica();
    balancer.add(a.url);
    balancer.add(b.url);
    const waitReady = async (url: string) => {
      while (!balancer.ready(url)) await new Promise((r) => setTimeout(r, 20));
    };
    await Promise.all([waitReady(a.url), waitReady(b.url)]);
    const token = await issuer.token({ audience: RESOURCE });

    let done = false;
    const running = load(balancer.url, token, 8, () => done, 20_000);
    const terminated: Array<{ url: string; at: number; exit: Promise<{ code: number | null }> }> = [];

    const restart = async (old: GatewayProcess): Promise<GatewayProcess> => {
      await new Promise((r) => setTimeout(r, 700));
      terminated.push({ url: old.url, at: performance.now(), exit: old.exited });
      old.child.kill('SIGTERM');
      const fresh = await replica(); // the replacement pod starts while the old one drains
      balancer.add(fresh.url);
      await waitReady(fresh.url);
      expect((await old.exited).code).toBe(0);
      balancer.remove(old.url);
      return fresh;
    };
    a = await restart(a);
    b = await restart(b);
    await new Promise((r) => setTimeout(r, 500));
    done = true;
    const outcomes = await running;
    await balancer.stop();

    const failed = outcomes.filter((o) => o.status !== 200);
    expect(failed, JSON.stringify({ terminated: terminated.map((t) => [t.url, t.at]), fresh: [a.url, b.url] })).toEqual([]);
    expect(outcomes.length).toBeGreaterThan(200);
    for (const { url, at } of terminated) {
      // Requests this replica was serving when SIGTERM arrived, and those it still took during drain_delay: all 200.
      const inFlight = outcomes.filter((o) => o.backend === url && o.start < at && o.end > at);
      const afterSigterm = outcomes.filter((o) => o.backend === url && o.start > at);
      expect(inFlight.length).toBeGreaterThan(0);
      expect(afterSigterm.every((o) => o.start < at + DRAIN_DELAY_MS)).toBe(true);
    }
    // Both replacements took traffic.
    for (const fresh of [a, b]) expect(outcomes.some((o) => o.backend === fresh.url)).toBe(true);
  }, 60_000);
});
