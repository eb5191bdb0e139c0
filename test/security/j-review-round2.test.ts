/**
 * Review, round 2: attacks on the new upstream transports. A stdio server is
 * untrusted output: whatever it prints must cost the gateway a bounded amount
 * of log, on stdout as on stderr (DESIGN §7.2: "stderr goes to the gateway's
 * log, tagged"; SECURITY: a flooding child costs a counter, never the log).
 * A real child process (this Node) does the flooding.
 */
import { request, type IncomingMessage } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { StdioChild } from '../../src/proxy/stdio/stdio-child.js';
import type { StdioUpstreamConfig } from '../../src/config/types.js';
import { DEFAULT_STDIO_RESOURCES } from '../../src/config/schema.js';
import { startStdioStage, waitFor, type StdioStage } from '../helpers/stdio-stage.js';

interface Logged {
  obj: Record<string, unknown>;
  msg: string;
}

const children: StdioChild[] = [];
afterEach(async () => {
  await Promise.all(children.splice(0).map((c) => c.stop(200)));
});

/** A child running `script` under this Node, its log lines captured. */
function startChild(script: string): { child: StdioChild; logged: Logged[]; messages: unknown[] } {
  const logged: Logged[] = [];
  const messages: unknown[] = [];
  const log = (obj: object, msg: string) => logged.push({ obj: obj as Record<string, unknown>, msg });
  const config: StdioUpstreamConfig = { command: process.execPath, args: ['-e', script], env: {}, inheritEnv: ['PATH'], maxProcesses: 1, maxProcessesPerPrincipal: 1, idleTimeoutMs: 60_000, resources: DEFAULT_STDIO_RESOURCES };
  const child = new StdioChild(
    config,
    { route: '/flood/mcp', session: 's1', maxLineBytes: 65_536, logger: { info: log, warn: log, error: log }, parentEnv: process.env },
    { message: (m) => messages.push(m), exit: () => undefined },
  );
  children.push(child);
  return { child, logged, messages };
}

const until = async (check: () => boolean, ms: number) => {
  const end = Date.now() + ms;
  while (!check() && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
};

describe('[J57] a stdio server flooding its stdout with lines that are not JSON-RPC', () => {
  it('is logged rate-limited and counted, like stderr, and its JSON-RPC still passes', async () => {
    // 20 000 banner lines, then one JSON-RPC message, then it stays alive.
    const script = `
      const line = 'debug: not json ' + 'x'.repeat(100) + '\\n';
      process.stdout.write(line.repeat(20000));
      process.stdout.write(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'after' } }) + '\\n');
      setInterval(() => {}, 1000);`;
    const { logged, messages } = startChild(script);
    await until(() => messages.length > 0, 10_000);
    await new Promise((r) => setTimeout(r, 200));
    expect(messages).toHaveLength(1);
    const stdoutLines = logged.filter((l) => l.obj.stream === 'stdout');
    // A burst and a steady rate pass, never one log line per line printed.
    expect(stdoutLines.length).toBeGreaterThan(0);
    expect(stdoutLines.length).toBeLessThan(200);
    expect(stdoutLines[0]!.obj).toMatchObject({ route: '/flood/mcp', session: 's1' });
  });

  it('cuts a long banner line, so the log holds a bounded amount of it', async () => {
    const { logged } = startChild(`process.stdout.write('y'.repeat(60000) + '\\n'); setInterval(() => {}, 1000);`);
    await until(() => logged.some((l) => l.obj.stream === 'stdout'), 10_000);
    const line = logged.find((l) => l.obj.stream === 'stdout')!;
    expect(line.msg.length).toBeLessThan(4_096);
  });
});

/**
 * A stdio server that floods notifications (16 KiB each, ~48 MiB in all) once initialized:
 * any server that logs or reports progress a lot, or whose resource a client subscribed to.
 */
const CHATTY_SERVER = `
  const send = (m) => process.stdout.write(JSON.stringify(m) + '\\n');
  const data = 'z'.repeat(16 * 1024);
  let left = 3000;
  const flood = () => {
    for (let i = 0; i < 50 && left > 0; i++, left--) send({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data } });
    if (left > 0) setTimeout(flood, 1);
  };
  require('node:readline').createInterface({ input: process.stdin }).on('line', (line) => {
    const m = JSON.parse(line);
    if (m.method === 'initialize') send({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { logging: {} }, serverInfo: { name: 'chatty', version: '1' } } });
    if (m.method === 'notifications/initialized') setTimeout(flood, 200);
  });
  process.stdin.on('end', () => process.exit(0));`;

describe('[J57] a client that never reads its stdio GET stream', () => {
  let stage: StdioStage | undefined;
  afterEach(async () => {
    await stage?.close();
    stage = undefined;
  });

  it('is cut once it leaves more than max_body_bytes unread, rather than held in the gateway memory', async () => {
    stage = await startStdioStage({
      '/chatty/mcp': { upstream: { stdio: { command: process.execPath, args: ['-e', CHATTY_SERVER] } }, limits: { max_body_bytes: 65_536 } },
    });
    const path = '/chatty/mcp';
    const headers = { authorization: `Bearer ${await stage.token(path)}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const init = await fetch(stage.url(path), {
      method: 'POST',
      headers: { ...headers, accept: 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'slow', version: '1' } } }),
    });
    expect(init.status).toBe(200);
    await init.text();
    const sessionId = init.headers.get('mcp-session-id')!;
    // The GET stream opened, its head read, and then never another byte.
    const url = new URL(stage.url(path));
    const stream = request({ host: url.hostname, port: url.port, path: url.pathname, method: 'GET', headers: { authorization: headers.authorization, accept: 'text/event-stream', 'mcp-session-id': sessionId } });
    const head = await new Promise<IncomingMessage>((resolve, reject) => stream.on('response', resolve).on('error', reject).end());
    expect(head.statusCode).toBe(200);
    head.pause();
    head.on('error', () => undefined);
    const openStreams = async () => (await stage!.gw.metrics.openStreams.get()).values.find((v) => v.labels.route === path)?.value ?? 0;
    expect(await openStreams()).toBe(1);
    const initialized = await fetch(stage.url(path), {
      method: 'POST',
      headers: { ...headers, 'mcp-session-id': sessionId },
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    });
    expect(initialized.status).toBe(202);
    // 48 MiB flow; kernel buffers take a few, 64 KiB more may wait in the gateway; then the stream is cut.
    await waitFor(async () => (await openStreams()) === 0, 30_000, 'the unread GET stream to be cut');
    head.destroy();
  }, 60_000);
});

/** A server that logs to its client every 50 ms once initialized, whether anyone listens or not. */
const TALKATIVE_SERVER = `
  const send = (m) => process.stdout.write(JSON.stringify(m) + '\\n');
  require('node:readline').createInterface({ input: process.stdin }).on('line', (line) => {
    const m = JSON.parse(line);
    if (m.method === 'initialize') send({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { logging: {} }, serverInfo: { name: 'talkative', version: '1' } } });
    if (m.method === 'notifications/initialized') setInterval(() => send({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'tick' } }), 50);
  });
  process.stdin.on('end', () => process.exit(0));`;

describe('[J57] a stdio session its client left without DELETE, on a server that keeps talking', () => {
  let stage: StdioStage | undefined;
  afterEach(async () => {
    await stage?.close();
    stage = undefined;
  });

  it('is idle all the same: its process is stopped after idle_timeout and max_processes frees up', async () => {
    const path = '/talk/mcp';
    stage = await startStdioStage({
      [path]: { upstream: { stdio: { command: process.execPath, args: ['-e', TALKATIVE_SERVER], idle_timeout: '400ms', max_processes: 1 } } },
    });
    const headers = { authorization: `Bearer ${await stage.token(path)}`, 'content-type': 'application/json', accept: 'application/json' };
    const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'gone', version: '1' } } };
    const init = await fetch(stage.url(path), { method: 'POST', headers, body: JSON.stringify(initialize) });
    expect(init.status).toBe(200);
    await init.text();
    const sessionId = init.headers.get('mcp-session-id')!;
    const initialized = await fetch(stage.url(path), { method: 'POST', headers: { ...headers, 'mcp-session-id': sessionId }, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
    expect(initialized.status).toBe(202);
    // The client is gone; the server talks to no one every 50 ms.
    const processes = async () => (await stage!.gw.metrics.stdioProcesses.get()).values.find((v) => v.labels.route === path)?.value ?? 0;
    expect(await processes()).toBe(1);
    await waitFor(async () => (await processes()) === 0, 10_000, 'the abandoned process to be stopped');
    // Another principal gets the route's one process.
    const other = await fetch(stage.url(path), { method: 'POST', headers: { ...headers, authorization: `Bearer ${await stage.token(path, 'bob')}` }, body: JSON.stringify(initialize) });
    expect(other.status).toBe(200);
    await other.text();
  }, 60_000);
});
