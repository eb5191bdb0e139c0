// `count` tools/call POSTs over keep-alive connections, each connection one
// request at a time (bench/instructions.ts, bench/gc-retention.ts): a fixed
// amount of work, whatever the machine's load.
import { Agent, request } from 'node:http';
import { MCP_HEADERS, MEASURED_BODY } from './load.js';

/** Throws on any non-200. `tokenOf(connection, k)`: the bearer of that connection's k-th request. */
export async function sendPosts(url: string, tokenOf: (connection: number, k: number) => string, count: number, connections: number): Promise<void> {
  const { hostname, port, pathname } = new URL(url);
  const body = Buffer.from(MEASURED_BODY);
  const perConnection = Math.ceil(count / connections);
  await Promise.all(
    Array.from({ length: connections }, async (_, c) => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      for (let k = 0; k < perConnection && c * perConnection + k < count; k++) {
        const headers = { ...MCP_HEADERS, authorization: `Bearer ${tokenOf(c, k)}`, 'content-length': String(body.length) };
        await new Promise<void>((done, fail) => {
          const req = request({ hostname, port, path: pathname, method: 'POST', headers, agent }, (res) => {
            res.resume();
            res.once('end', () => (res.statusCode === 200 ? done() : fail(new Error(`status ${res.statusCode}`))));
          });
          req.once('error', fail);
          req.end(body);
        });
      }
      agent.destroy();
    }),
  );
}
