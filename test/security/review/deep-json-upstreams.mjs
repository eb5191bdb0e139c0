// Hostile upstreams whose answers nest 100 000 arrays deep: V8's JSON.parse reads that, but
// JSON.stringify throws RangeError (call stack) on it. Modes:
//   stdio   — a stdio MCP server (argv[2] === 'stdio') answering tools/call with a deep result
//             (tool `ok`: a plain one)
//   sse     — (argv[2] === 'sse') a legacy HTTP+SSE server; after initialize it sends a batch of one deep answer
//   http    — (argv[2] === 'http') a Streamable HTTP server answering tools/list with a deep JSON body
import { createServer } from 'node:http';
import { createInterface } from 'node:readline';
const DEPTH = 100_000;
const deep = '['.repeat(DEPTH) + ']'.repeat(DEPTH);
const init = (id) => `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"deep","version":"1"}}}`;
const mode = process.argv[2];
if (mode === 'stdio') {
  createInterface({ input: process.stdin }).on('line', (line) => {
    const m = JSON.parse(line);
    if (m.id === undefined) return;
    if (m.method === 'initialize') process.stdout.write(init(m.id) + '\n');
    else if (m.params?.name === 'ok') process.stdout.write(`{"jsonrpc":"2.0","id":${JSON.stringify(m.id)},"result":{"content":[{"type":"text","text":"ok"}]}}\n`);
    else process.stdout.write(`{"jsonrpc":"2.0","id":${JSON.stringify(m.id)},"result":{"content":[],"deep":${deep}}}\n`);
  });
} else {
  let stream;
  const server = createServer((req, res) => {
    if (mode === 'sse' && req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('event: endpoint\ndata: /message?sessionId=s\n\n');
      stream = res;
      return;
    }
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const m = JSON.parse(body || '{}');
      if (mode === 'sse') {
        res.writeHead(202).end();
        if (m.id === undefined) return;
        const answer = m.method === 'initialize' ? init(m.id) : `[{"jsonrpc":"2.0","id":${JSON.stringify(m.id)},"result":{"deep":${deep}}}]`;
        stream.write(`event: message\ndata: ${answer}\n\n`);
        return;
      }
      if (m.id === undefined) return res.writeHead(202).end();
      res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'sess-1' });
      res.end(m.method === 'initialize' ? init(m.id) : `{"jsonrpc":"2.0","id":${JSON.stringify(m.id)},"result":{"tools":[{"name":"a","inputSchema":{"type":"object"},"x":${deep}}]}}`);
    });
  });
  server.listen(0, '127.0.0.1', () => console.log(`http://127.0.0.1:${server.address().port}${mode === 'sse' ? '/sse' : '/mcp'}`));
}
