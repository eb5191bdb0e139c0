// Baseline: node-http-proxy with a keep-alive agent and no authentication,
// what a team would otherwise put in front of an MCP server in Node.
import { Agent, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import httpProxy from 'http-proxy';

const target = process.env.BENCH_TARGET;
if (!target) throw new Error('BENCH_TARGET (the upstream origin) is required');

const agent = new Agent({ keepAlive: true, maxSockets: 256 });
const proxy = httpProxy.createProxyServer({ target, agent });
// No auth, but the client's token goes no further, as through the gateway.
proxy.on('proxyReq', (proxyReq) => proxyReq.removeHeader('authorization'));
proxy.on('error', (_err, _req, res) => {
  if ('writeHead' in res && !res.headersSent) res.writeHead(502);
  res.end();
});

const server = createServer((req, res) => proxy.web(req, res));
server.listen(0, '127.0.0.1', () => {
  console.log(JSON.stringify({ ready: true, port: (server.address() as AddressInfo).port }));
});
process.on('SIGTERM', () => process.exit(0));
