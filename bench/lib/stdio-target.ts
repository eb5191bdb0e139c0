// The stdio route of bench/instructions.ts: @modelcontextprotocol/server-memory
// started by the gateway (one process per session), reached by the TS SDK's
// Streamable HTTP client as bench/stdio-route.ts reaches it, so that the
// instructions counted per `tools/call` are those of the route users run.
import { createRequire } from 'node:module';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Issuer } from './tokens.js';
import { REQUIRED_SCOPE } from './gateway.js';

export const STDIO_PATH = '/memory/mcp';

const memoryScript = createRequire(import.meta.url).resolve('@modelcontextprotocol/server-memory/dist/index.js');

/** The route file: JWT checked on every request, a process per session, its memory file in the process's own directory. */
export function stdioRouteYaml(issuer: Issuer): string {
  const stdio = { command: process.execPath, args: [memoryScript], env: { MEMORY_FILE_PATH: '${PROCESS_DIR}/memory.jsonl' }, max_processes: 40, idle_timeout: '1h' };
  return [
    `path: ${STDIO_PATH}`,
    `upstream: ${JSON.stringify({ stdio })}`,
    `authorization_servers: [${issuer.issuer}]`,
    `token: { jwt: { issuer: ${issuer.issuer}, jwks_uri: ${issuer.jwksUri}, algorithms: [${issuer.alg}] } }`,
    `required_scopes: [${REQUIRED_SCOPE}]`,
    '',
  ].join('\n');
}

export interface StdioSessions {
  /** `count` tools/call search_nodes, spread over the sessions, each session one call at a time; throws on an error answer. */
  calls(count: number): Promise<void>;
  close(): Promise<void>;
}

/** One session per token (one principal each), opened now and kept: their processes start once. */
export async function openStdioSessions(url: string, tokens: readonly string[]): Promise<StdioSessions> {
  const clients = await Promise.all(
    tokens.map(async (token) => {
      const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } });
      const client = new Client({ name: 'bench', version: '0' });
      await client.connect(transport);
      return { client, transport };
    }),
  );
  return {
    async calls(count) {
      const per = Math.ceil(count / clients.length);
      await Promise.all(
        clients.map(async ({ client }, c) => {
          for (let k = 0; k < per && c * per + k < count; k++) {
            const result = await client.callTool({ name: 'search_nodes', arguments: { query: `q${k}` } });
            if (result.isError === true) throw new Error('tools/call answered with an error');
          }
        }),
      );
    },
    async close() {
      for (const { client, transport } of clients) {
        await transport.terminateSession().catch(() => undefined);
        await client.close();
      }
    },
  };
}
