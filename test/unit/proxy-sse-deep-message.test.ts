/**
 * [K63] A legacy SSE upstream's event that makes the gateway's reading throw (a batch member nested
 * past the stack's depth: JSON.parse takes it, JSON.stringify of the member throws) ends that
 * upstream connection as a protocol error; it never escapes the stream's 'data' listener, where it
 * would end the process. The frame is sent in the same write as the endpoint event, so it is
 * already buffered when the listener is attached: the case a review reproduced as a crash.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { SseScope } from '../../src/proxy/sse/sse-scope.js';
import { UpstreamConnection } from '../../src/proxy/sse/upstream-connection.js';

const DEPTH = 10_000;
const deep = `[${'['.repeat(DEPTH)}${']'.repeat(DEPTH)}]`;

let server: Server | undefined;
let pool: Pool | undefined;

afterEach(async () => {
  await pool?.destroy();
  server?.closeAllConnections();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
});

describe('[K63] a legacy SSE upstream whose event makes the reading throw', () => {
  it('[K63] loses that connection as a protocol error; nothing escapes, the process goes on', async () => {
    server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`event: endpoint\ndata: /messages?s=1\n\nevent: message\ndata: ${deep}\n\n`);
    });
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    const url = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/sse`);
    pool = new Pool(url.origin);
    const scope = new SseScope('/deep/mcp', { maxBytes: 4 * 1_048_576, timeoutMs: 5_000 } as never, {} as never);
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown) => uncaught.push(err);
    process.on('uncaughtException', onUncaught);
    try {
      const lost = new Promise<GatewayError>((resolve) => {
        const connection = new UpstreamConnection(pool!, url, scope, { message: () => undefined, lost: resolve });
        void connection.open({} as never).catch(() => undefined);
      });
      const err = await lost;
      expect(err).toBeInstanceOf(GatewayError);
      expect(err.message).toContain('could not be handled');
      await new Promise((r) => setTimeout(r, 100));
      expect(uncaught).toEqual([]);
    } finally {
      process.off('uncaughtException', onUncaught);
    }
  });
});
