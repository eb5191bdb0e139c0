// A tiny MCP server over stdio, written without any SDK so each fault is exact.
// Mode is argv[2]: probe (default: reports its env, argv, cwd and pid; sleeps; holds;
// crashes mid-call; asks the client for sampling; pushes tool lists nobody asked
// for (push_tools, unlisted); tries what client-chosen
// code could do to the gateway and its neighbours), silent (never answers),
// flood (floods stderr, then serves), exit (exits at once), huge (a tools/list
// answer over any sane line limit).
import { closeSync, existsSync, openSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

const mode = process.argv[2] ?? 'probe';
if (mode === 'exit') process.exit(3);

const send = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);
const pendingAsks = new Map();
let askId = 1000;

const TOOLS = [
  { name: 'report', description: 'env, argv, cwd, pid', inputSchema: { type: 'object', properties: {} } },
  { name: 'sleep', description: 'answers after ms', inputSchema: { type: 'object', properties: { ms: { type: 'number' } } } },
  {
    name: 'hold',
    description: 'says "holding <tag>" on stderr, then answers once the file `until` exists, or after ms at most',
    inputSchema: { type: 'object', properties: { tag: { type: 'string' }, until: { type: 'string' }, ms: { type: 'number' } } },
  },
  { name: 'crash', description: 'exits without answering', inputSchema: { type: 'object', properties: {} } },
  { name: 'ask', description: 'asks the client for a sampling', inputSchema: { type: 'object', properties: {} } },
  { name: 'delete_all', description: 'a tool policies deny', inputSchema: { type: 'object', properties: {} } },
  { name: 'meta', description: 'the params._meta it was called with', inputSchema: { type: 'object', properties: {} } },
  {
    name: 'attack',
    description: "what client-chosen code could reach: the gateway's environment and memory, another process's directory, a file, the processes it may signal",
    inputSchema: { type: 'object', properties: { gatewayPid: { type: 'number' }, otherDir: { type: 'string' }, file: { type: 'string' }, writeTo: { type: 'array' } } },
  },
  // The spec's example of a 2026-07-28 argument mirrored in an Mcp-Param-Region header.
  { name: 'route_query', description: 'x-mcp-header on region', inputSchema: { type: 'object', properties: { region: { type: 'string', 'x-mcp-header': 'Region' } } } },
];

/** `{ ok: value }` or `{ error: code }`. */
function attempt(run) {
  try {
    return { ok: run() };
  } catch (err) {
    return { error: err.code ?? String(err) };
  }
}

/** What a server running client-chosen code can do to its neighbours (SECURITY.md, stdio isolation). */
function attack({ gatewayPid, otherDir, file, writeTo = [] }) {
  const pids = readdirSync('/proc').filter((name) => /^[0-9]+$/.test(name)).map(Number);
  const signalable = pids.filter((pid) => pid !== process.pid && attempt(() => process.kill(pid, 0)).error === undefined);
  return {
    uid: process.getuid(),
    gatewayEnviron: attempt(() => readFileSync(`/proc/${gatewayPid}/environ`, 'latin1')),
    gatewayMemory: attempt(() => closeSync(openSync(`/proc/${gatewayPid}/mem`, 'r')) ?? 'opened'),
    signalGateway: attempt(() => process.kill(gatewayPid, 0)),
    otherDir: attempt(() => readdirSync(otherDir)),
    otherFile: attempt(() => readFileSync(`${otherDir}/secret.txt`, 'utf8')),
    file: attempt(() => readFileSync(file, 'utf8')),
    visiblePids: pids.length,
    signalable,
    writes: writeTo.map((path) => attempt(() => writeFileSync(path, 'written') ?? 'written')),
  };
}

// A busy process for as long as a test needs it, not a fixed time: the test sees the call arrive (the
// stderr line, in the gateway's log) and ends it by creating the file.
function hold({ tag = '', until, ms = 30_000 }, reply) {
  process.stderr.write(`holding ${tag}\n`);
  const deadline = Date.now() + ms;
  const timer = setInterval(() => {
    if ((until && existsSync(until)) || Date.now() >= deadline) {
      clearInterval(timer);
      reply(text(`held ${tag}`));
    }
  }, 20);
}

const text = (value) => ({ content: [{ type: 'text', text: typeof value === 'string' ? value : JSON.stringify(value) }] });

function call(message) {
  const { name, arguments: args = {} } = message.params;
  const reply = (result) => send({ jsonrpc: '2.0', id: message.id, result });
  switch (name) {
    case 'report':
      return reply(text({ env: process.env, argv: process.argv.slice(2), cwd: process.cwd(), pid: process.pid }));
    case 'sleep':
      return setTimeout(() => reply(text(`slept ${args.ms}`)), args.ms ?? 0);
    case 'hold':
      return hold(args, reply);
    case 'meta':
      return reply(text(message.params._meta ?? null));
    case 'attack':
      return reply(text(attack(args)));
    case 'crash':
      return process.exit(7);
    case 'push_tools': {
      // Tool lists the client never asked for (null id, no id, in a batch, on a notification), then a marker: where do they go, filtered?
      const listed = { tools: TOOLS };
      send({ jsonrpc: '2.0', id: null, result: listed });
      send({ jsonrpc: '2.0', result: listed });
      send([{ jsonrpc: '2.0', id: null, result: listed }]);
      send({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'listed' }, result: listed });
      send({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'done' } });
      return reply(text('pushed'));
    }
    case 'ask': {
      const id = askId++;
      pendingAsks.set(id, (answer) => reply(text(answer)));
      return send({ jsonrpc: '2.0', id, method: 'sampling/createMessage', params: { messages: [{ role: 'user', content: { type: 'text', text: 'hi' } }], maxTokens: 5 } });
    }
    default:
      return reply(text(`called ${name}`));
  }
}

function handle(message) {
  if (message.id !== undefined && message.method === undefined) {
    const resolve = pendingAsks.get(message.id);
    pendingAsks.delete(message.id);
    return resolve?.(message.result ?? message.error);
  }
  // Said on stderr, so a test can see from the gateway's log that a cancellation arrived.
  if (message.method === 'notifications/cancelled') process.stderr.write(`cancelled request ${message.params.requestId}\n`);
  if (mode === 'silent' || message.id === undefined) return;
  switch (message.method) {
    case 'initialize':
      return send({ jsonrpc: '2.0', id: message.id, result: { protocolVersion: message.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'fixture', version: '1' } } });
    case 'tools/list':
      if (mode === 'huge') return send({ jsonrpc: '2.0', id: message.id, result: { tools: TOOLS, padding: 'x'.repeat(200_000) } });
      return send({ jsonrpc: '2.0', id: message.id, result: { tools: TOOLS } });
    case 'tools/call':
      return call(message);
    case 'subscriptions/listen':
      // 2026-07-28: acknowledged on the listen's own stream, then held open (never answered).
      return send({ jsonrpc: '2.0', method: 'notifications/subscriptions/acknowledged', params: { _meta: { 'io.modelcontextprotocol/subscriptionId': message.id } } });
    default:
      return send({ jsonrpc: '2.0', id: message.id, error: { code: -32601, message: 'Method not found' } });
  }
}

if (mode === 'flood') {
  const line = `${'e'.repeat(200)}\n`;
  // About 20 MB, far more than the gateway may keep or log.
  let rounds = 500;
  const flood = () => {
    for (let i = 0; i < 200; i++) process.stderr.write(line);
    if (--rounds > 0) setTimeout(flood, 0);
  };
  flood();
}
// Not JSON-RPC: a banner on stdout that must be logged, never forwarded.
process.stdout.write('fixture server starting (not JSON)\n');
createInterface({ input: process.stdin }).on('line', (line) => handle(JSON.parse(line)));
process.stdin.on('end', () => process.exit(0));
