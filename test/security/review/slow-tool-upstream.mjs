// A Streamable HTTP MCP server with tools `echo` (answers at once), `slow` (answers after 3 s) and
// `forbidden` (HTTP 403, as an upstream refusing one caller answers). Nothing hostile: a tool that takes longer than a route's upstream_timeout is ordinary.
import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
const server = createServer((req, res) => {
  if (req.method !== 'POST') return res.writeHead(405).end();
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    const m = JSON.parse(body);
    if (m.id === undefined) return res.writeHead(202).end();
    const answer = (result) => {
      res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': req.headers['mcp-session-id'] ?? randomUUID() });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: m.id, result }));
    };
    if (m.method === 'initialize') return answer({ protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'slow', version: '1' } });
    if (m.method === 'tools/list') return answer({ tools: [{ name: 'echo', inputSchema: { type: 'object' } }, { name: 'slow', inputSchema: { type: 'object' } }, { name: 'forbidden', inputSchema: { type: 'object' } }] });
    // An upstream's own refusal of one caller (its authorization, its rate limit): HTTP 403 for this call alone.
    if (m.method === 'tools/call' && m.params.name === 'forbidden') return res.writeHead(403, { 'content-type': 'application/json' }).end('{"error":"forbidden"}');
    if (m.method === 'tools/call' && m.params.name === 'slow') return setTimeout(() => answer({ content: [{ type: 'text', text: 'late' }] }), 3000);
    answer({ content: [{ type: 'text', text: 'echo' }] });
  });
});
server.listen(0, '127.0.0.1', () => console.log(`http://127.0.0.1:${server.address().port}/mcp`));
