// A Streamable HTTP MCP server whose tools/list pages each come close to max_body_bytes (4 MiB:
// some 110 000 small tools a page), PAGES of them. Legal, if large.
import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
const PER_PAGE = Number(process.argv[2] ?? 110_000);
/** Pages served before the last (no nextCursor); the gateway follows up to 100. */
const PAGES = Number(process.argv[3] ?? 100);
const page = (n) => JSON.stringify({ tools: Array.from({ length: PER_PAGE }, (_, i) => ({ name: `t${n}_${i}`, inputSchema: {} })), nextCursor: String(n + 1) });
let cached; // one page's text, ids aside, built once
const server = createServer((req, res) => {
  if (req.method !== 'POST') return res.writeHead(405).end();
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    const m = JSON.parse(body);
    if (m.id === undefined) return res.writeHead(202).end();
    res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': req.headers['mcp-session-id'] ?? randomUUID() });
    if (m.method === 'initialize') return res.end(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'big', version: '1' } } }));
    if (m.method === 'tools/list') {
      const n = Number(m.params?.cursor ?? 0);
      cached ??= page(0);
      const text = cached.replaceAll('"t0_', `"t${n}_`).replace('"nextCursor":"1"', n + 1 < PAGES ? `"nextCursor":"${n + 1}"` : '"nextCursor":""');
      return res.end(`{"jsonrpc":"2.0","id":${JSON.stringify(m.id)},"result":${text}}`);
    }
    res.end(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: {} }));
  });
});
server.listen(0, '127.0.0.1', () => console.log(`http://127.0.0.1:${server.address().port}/mcp`));
