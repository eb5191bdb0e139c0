// What holding Mcp-Param-* headers to the body costs (src/policy/param-headers.ts):
// CPU per tools/call of a tool the route knows (four mirrored arguments, one
// nested), of a tool it never saw listed (the lookup alone), and per
// tools/list learnt (100 annotated tools). Pure CPU of the policy step's
// extra work, no HTTP: compare with the gateway's CPU per request in
// docs/benchmark.md.
// Run: npx tsx bench/param-headers-check.ts [calls per round] [rounds]
import { parseJsonRpcBody } from '../src/policy/json-rpc.js';
import { checkParamHeaders } from '../src/policy/param-headers.js';
import { ToolParamRegistry } from '../src/policy/tool-param-registry.js';

const PER_ROUND = Number(process.argv[2] ?? 200_000);
const ROUNDS = Number(process.argv[3] ?? 3);

const tool = {
  name: 'execute_sql',
  inputSchema: {
    type: 'object',
    properties: {
      region: { type: 'string', 'x-mcp-header': 'Region' },
      priority: { type: 'integer', 'x-mcp-header': 'Priority' },
      dry: { type: 'boolean', 'x-mcp-header': 'Dry' },
      target: { type: 'object', properties: { tenant: { type: 'string', 'x-mcp-header': 'Tenant' } } },
      query: { type: 'string' },
    },
  },
};
const registry = new ToolParamRegistry();
registry.learn([tool]);
const args = { region: 'us-west1', priority: 3, dry: false, target: { tenant: 'acme' }, query: 'SELECT 1' };
const known = parseJsonRpcBody(Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'execute_sql', arguments: args } })));
const unknown = parseJsonRpcBody(Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: { text: 'hi' } } })));
const headers = { 'mcp-protocol-version': '2026-07-28', 'mcp-param-region': 'us-west1', 'mcp-param-priority': '3', 'mcp-param-dry': 'false', 'mcp-param-tenant': 'acme' };
const list = Array.from({ length: 100 }, (_, i) => ({ ...tool, name: `tool_${i}` }));

/** CPU µs per call of `fn`, after a warm-up of a tenth as many. */
function cpuMicros(n: number, fn: () => void): number {
  for (let i = 0; i < n / 10; i++) fn();
  const start = process.cpuUsage();
  for (let i = 0; i < n; i++) fn();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / n;
}

for (let round = 1; round <= ROUNDS; round++) {
  const knownCost = cpuMicros(PER_ROUND, () => checkParamHeaders(headers, known, registry));
  const unknownCost = cpuMicros(PER_ROUND, () => checkParamHeaders(headers, unknown, registry));
  const learnCost = cpuMicros(Math.max(1, PER_ROUND / 100), () => new ToolParamRegistry().learn(list));
  console.log(`round ${round}: known tool ${knownCost.toFixed(2)} µs/call, never listed ${unknownCost.toFixed(2)} µs/call, learning 100 tools ${learnCost.toFixed(0)} µs/list`);
}
