// A Streamable HTTP MCP server (2025-11-25 tasks, stateless) whose task store is a plain object and
// whose task ids count up ("1", "2", …): `tasks[params.taskId]` finds task "1" for taskId 1 as
// well (property keys are strings), as SQLite's TEXT affinity, PHP arrays and many hand-written
// servers do. Each task remembers whose it is only for the test's reading (`owner` from the call).
import { createServer } from 'node:http';
const tasks = {};
let next = 1;
const server = createServer((req, res) => {
  if (req.method !== 'POST') return res.writeHead(405).end();
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    const m = JSON.parse(body);
    if (m.id === undefined) return res.writeHead(202).end();
    const answer = (payload) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: m.id, ...payload }));
    };
    const p = m.params ?? {};
    if (m.method === 'initialize') return answer({ result: { protocolVersion: p.protocolVersion, capabilities: { tools: {}, tasks: { requests: { tools: { call: {} } } } }, serverInfo: { name: 'tasks', version: '1' } } });
    if (m.method === 'tools/call') {
      const taskId = String(next++);
      tasks[taskId] = { taskId, status: 'completed', ttl: 60_000, createdAt: new Date().toISOString(), secret: `result of ${JSON.stringify(p.arguments)}` };
      return answer({ result: { task: { taskId, status: 'working', ttl: 60_000, createdAt: tasks[taskId].createdAt } } });
    }
    if (m.method === 'tasks/get' || m.method === 'tasks/result') {
      const task = tasks[p.taskId];
      return task ? answer({ result: task }) : answer({ error: { code: -32602, message: 'Unknown task' } });
    }
    answer({ error: { code: -32601, message: 'Method not found' } });
  });
});
server.listen(0, '127.0.0.1', () => console.log(`http://127.0.0.1:${server.address().port}/mcp`));
