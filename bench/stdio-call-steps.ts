// node --import tsx bench/stdio-call-steps.ts [--calls N] [--rounds N] [--entry FILE]
// Where one stdio `tools/call` spends its time, step by step: the stdio route of bench/instructions.ts
// (server-memory, a process per session, JWT) through the gateway (the build, with
// bench/lib/step-probe.mjs stamping each step inside it on the wall clock the client reads), called
// one at a time by the MCP SDK's Streamable HTTP client (as bench/stdio-route.ts calls it) and by a
// bare node:http client (the same request bytes, one kept-alive connection); and server-memory
// called directly by the SDK's stdio client and by a bare pipe client (one line written, one read).
// Interleaved rounds; medians. Also the gateway process's own CPU per call (/proc, its children
// left out) per client, from the same rounds.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { Agent, request } from 'node:http';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { audienceOf } from './lib/environment.js';
import { REQUIRED_SCOPE, startGatewayProcess } from './lib/gateway.js';
import { clockTicks } from './lib/processes.js';
import { median } from './lib/stats.js';
import { STDIO_PATH, stdioRouteYaml } from './lib/stdio-target.js';
import { startIssuer } from './lib/tokens.js';

const { values: opts } = parseArgs({
  options: {
    calls: { type: 'string', default: '200' },
    rounds: { type: 'string', default: '3' },
    entry: { type: 'string', default: 'bin/mcp-auth-gateway.js' },
  },
});
const CALLS = Number(opts.calls);
const ROUNDS = Number(opts.rounds);
const wallClock = () => performance.timeOrigin + performance.now();
const memoryScript = createRequire(import.meta.url).resolve('@modelcontextprotocol/server-memory/dist/index.js');
const callOf = (id: number) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'search_nodes', arguments: { query: `q${id}` } } });

/** The gateway process's own CPU seconds (utime + stime), its children not counted. */
function ownCpu(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / clockTicks();
}

interface Caller {
  name: string;
  /** One call; resolves with the client's start and end stamps. */
  call(k: number): Promise<{ start: number; end: number }>;
  close(): Promise<void>;
}

async function sdkCaller(name: string, client: Client, close: () => Promise<void>): Promise<Caller> {
  return {
    name,
    async call(k) {
      const start = wallClock();
      const result = await client.callTool({ name: 'search_nodes', arguments: { query: `q${k}` } });
      const end = wallClock();
      if (result.isError === true) throw new Error(`${name}: error answer`);
      return { start, end };
    },
    close,
  };
}

/** A bare node:http client on one kept-alive connection, in a session of its own (initialize and initialized first). */
async function bareHttpCaller(url: string, token: string): Promise<Caller> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const { hostname, port, pathname } = new URL(url);
  const post = (body: unknown, session?: string) =>
    new Promise<{ status: number; session?: string; text: string }>((done, fail) => {
      const bytes = Buffer.from(JSON.stringify(body));
      const headers: Record<string, string> = {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-06-18',
        'content-length': String(bytes.length),
        ...(session && { 'mcp-session-id': session }),
      };
      const req = request({ hostname, port, path: pathname, method: 'POST', headers, agent }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.once('end', () => done({ status: res.statusCode ?? 0, session: res.headers['mcp-session-id'] as string | undefined, text }));
      });
      req.once('error', fail);
      req.end(bytes);
    });
  const init = await post({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bare', version: '0' } } });
  if (init.status !== 200 || !init.session) throw new Error(`bare initialize: ${init.status} ${init.text}`);
  const session = init.session;
  await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, session);
  return {
    name: 'gateway, bare http',
    async call(k) {
      const start = wallClock();
      const answer = await post(callOf(k + 1), session);
      const end = wallClock();
      if (answer.status !== 200 || !answer.text.includes('"result"')) throw new Error(`bare call: ${answer.status} ${answer.text}`);
      return { start, end };
    },
    close: async () => agent.destroy(),
  };
}

/** server-memory on a bare pipe: one line written, its answer line read (initialize and initialized first). */
async function barePipeCaller(dir: string): Promise<Caller> {
  const child = spawn(process.execPath, [memoryScript], { env: { ...process.env, MEMORY_FILE_PATH: join(dir, 'bare-pipe.jsonl') }, stdio: ['pipe', 'pipe', 'ignore'] });
  let pending = '';
  let waiting: ((line: string) => void) | undefined;
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    pending += chunk;
    let nl;
    while ((nl = pending.indexOf('\n')) !== -1) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      waiting?.(line);
    }
  });
  const exchange = (message: unknown) =>
    new Promise<string>((done) => {
      waiting = done;
      child.stdin.write(`${JSON.stringify(message)}\n`);
    });
  await exchange({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bare', version: '0' } } });
  child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);
  return {
    name: 'direct, bare pipe',
    async call(k) {
      const start = wallClock();
      const line = await exchange(callOf(k + 1));
      const end = wallClock();
      if (!line.includes('"result"')) throw new Error(`bare pipe: ${line}`);
      return { start, end };
    },
    close: async () => void child.kill(),
  };
}

type Probe = Partial<Record<'request' | 'childWrite' | 'childRead' | 'end', number>> & { method?: string };

const dir = await mkdtemp(join(tmpdir(), 'mag-stdio-steps-'));
const issuer = await startIssuer('ES256', `${REQUIRED_SCOPE} mcp:write`);
const gateway = await startGatewayProcess('gateway', {
  // The bench's HTTP routes are not called here.
  upstreamOrigin: 'http://127.0.0.1:9',
  issuer: issuer.issuer,
  jwksUri: issuer.jwksUri,
  alg: 'ES256',
  runtime: 'dist',
  entry: resolve(opts.entry),
  nodeArgs: ['--import', resolve('bench/lib/step-probe.mjs')],
  env: { BENCH_PROBE_FILE: join(dir, 'gateway.jsonl'), BENCH_PROBE_PATH: STDIO_PATH },
  extraRoutes: { 'stdio.yaml': stdioRouteYaml(issuer) },
});
const url = `${gateway.url}${STDIO_PATH}`;
const [sdkToken, bareToken] = await issuer.mintMany(audienceOf(STDIO_PATH), 2, 'steps');
const sdkTransport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${sdkToken}` } } });
const sdkClient = new Client({ name: 'bench', version: '0' });
await sdkClient.connect(sdkTransport);
const directTransport = new StdioClientTransport({ command: process.execPath, args: [memoryScript], env: { MEMORY_FILE_PATH: join(dir, 'direct.jsonl') }, stderr: 'ignore' });
const directClient = new Client({ name: 'bench', version: '0' });
await directClient.connect(directTransport);
const callers = [
  await sdkCaller('gateway, SDK http', sdkClient, async () => {
    await sdkTransport.terminateSession().catch(() => undefined);
    await sdkClient.close();
  }),
  await bareHttpCaller(url, bareToken!),
  await sdkCaller('direct, SDK stdio', directClient, () => directClient.close()),
  await barePipeCaller(dir),
];
const stamps = new Map<string, { start: number; end: number }[]>(callers.map((c) => [c.name, []]));
const cpu = new Map<string, number>(callers.map((c) => [c.name, 0]));

try {
  // Warm-up, not recorded.
  for (const caller of callers) for (let k = 0; k < 300; k++) await caller.call(k);
  for (let round = 1; round <= ROUNDS; round++) {
    for (const caller of callers) {
      const before = ownCpu(gateway.pid);
      for (let k = 0; k < CALLS; k++) stamps.get(caller.name)!.push(await caller.call(k));
      cpu.set(caller.name, cpu.get(caller.name)! + ownCpu(gateway.pid) - before);
    }
  }
  process.kill(gateway.pid, 'SIGUSR2');
  await new Promise((r) => setTimeout(r, 500));
  const records = (await readFile(join(dir, 'gateway.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as Probe);
  // The measured calls' POSTs are the last ones, in the order sent: per round, each gateway caller's CALLS.
  const gatewayCallers = callers.filter((c) => c.name.startsWith('gateway'));
  const calls = records.filter((r) => r.method === 'POST' && r.childWrite !== undefined).slice(-ROUNDS * gatewayCallers.length * CALLS);
  const probeOf = (index: number) => Array.from({ length: ROUNDS }, (_, r) => calls.slice((r * gatewayCallers.length + index) * CALLS, (r * gatewayCallers.length + index + 1) * CALLS)).flat();
  const ms = (v: number) => v.toFixed(3).padStart(7);
  console.log(`${ROUNDS} rounds × ${CALLS} calls per client, one at a time; medians in ms; gateway CPU from /proc (its children not counted)`);
  for (const caller of callers) {
    const s = stamps.get(caller.name)!;
    const gatewayCpu = caller.name.startsWith('gateway') ? `, gateway CPU ${((cpu.get(caller.name)! * 1e6) / (ROUNDS * CALLS)).toFixed(0)} µs/call` : '';
    console.log(`  ${caller.name.padEnd(20)} ${ms(median(s.map((t) => t.end - t.start)))}${gatewayCpu}`);
  }
  console.log(`\nthrough the gateway, step by step (the gateway's steps from its probe; ${calls.length} calls stamped):`);
  for (const [index, caller] of gatewayCallers.entries()) {
    const client = stamps.get(caller.name)!;
    const probe = probeOf(index);
    if (probe.length !== client.length) {
      console.log(`  ${caller.name}: ${probe.length} probe records for ${client.length} calls, not matched`);
      continue;
    }
    const step = (f: (c: { start: number; end: number }, p: Probe) => number) => ms(median(client.map((c, i) => f(c, probe[i]!))));
    console.log(`  ${caller.name}:`);
    console.log(`    client start → gateway has the request         ${step((c, p) => p.request! - c.start)}`);
    console.log(`    request → line written to the child's stdin    ${step((_, p) => p.childWrite! - p.request!)}`);
    console.log(`    stdin write → the child's answer read          ${step((_, p) => p.childRead! - p.childWrite!)}`);
    console.log(`    answer read → response ended                   ${step((_, p) => p.end! - p.childRead!)}`);
    console.log(`    response ended → client has the result         ${step((c, p) => c.end - p.end!)}`);
  }
} finally {
  for (const caller of callers) await caller.close().catch(() => undefined);
  await gateway.stop();
  await issuer.close();
  await rm(dir, { recursive: true, force: true });
}
