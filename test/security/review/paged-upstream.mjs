// A Streamable HTTP MCP server with resources: every resources/list answer has a next page
// (nextCursor) and one resource; it prints the number of resources/list requests on stdout on each
// GET /count. Nothing hostile in its answers: a long list is legal.
import { createServer } from 'node:http';
let lists = 0;
const server = createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/count') return res.end(String(lists));
  if (req.method !== 'POST') return res.writeHead(405).end();
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    const m = JSON.parse(body);
    if (m.id === undefined) return res.writeHead(202).end();
    let result;
    if (m.method === 'initialize') result = { protocolVersion: m.params.protocolVersion, capabilities: { resources: {} }, serverInfo: { name: 'paged', version: '1' } };
    else if (m.method === 'resources/list') {
      lists++;
      const page = Number(m.params?.cursor ?? 0);
      result = { resources: [{ uri: `mem://r${page}`, name: `r${page}` }], nextCursor: String(page + 1) };
    } else result = {};
    res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 's1' });
    res.end(JSON.stringify({ jsonrpc: '2.0', id: m.id, result }));
  });
});
server.listen(0, '127.0.0.1', () => console.log(`http://127.0.0.1:${server.address().port}/mcp`));
