/**
 * Review, round 2: attacks on the new upstream transports. A stdio server is
 * untrusted output: whatever it prints must cost the gateway a bounded amount
 * of log, on stdout as on stderr (DESIGN §7.2: "stderr goes to the gateway's
 * log, tagged"; SECURITY: a flooding child costs a counter, never the log).
 * A real child process (this Node) does the flooding.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { StdioChild } from '../../src/proxy/stdio/stdio-child.js';
import type { StdioUpstreamConfig } from '../../src/config/types.js';

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
  const config: StdioUpstreamConfig = { command: process.execPath, args: ['-e', script], env: {}, inheritEnv: ['PATH'], maxProcesses: 1, idleTimeoutMs: 60_000 };
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
