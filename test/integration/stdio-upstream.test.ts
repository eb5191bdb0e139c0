/**
 * stdio upstreams end to end (DESIGN §7.2): real unmodified MCP servers from node_modules
 * started by the gateway as child processes, the real MCP SDK client through the gateway, and
 * every rule of the route (auth, policy, tools/list filtering, session binding) on top.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectClient, FIXTURE_SERVER, resultText, serverBin, startStdioStage, type StdioStage } from '../helpers/stdio-stage.js';

const MEMORY = '/memory/mcp';
const FILES = '/files/mcp';
const EVERYTHING = '/everything/mcp';
const PROBE = '/probe/mcp';

let stage: StdioStage;
let root: string;

const stdio = (command: string, args: string[], more: Record<string, unknown> = {}) => ({ upstream: { stdio: { command, args, ...more } } });

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'mag-fs-root-'));
  await writeFile(join(root, 'hello.txt'), 'hello from the temp root\n');
  stage = await startStdioStage(
    {
      [MEMORY]: stdio(process.execPath, [serverBin('@modelcontextprotocol/server-memory')], { env: { MEMORY_FILE_PATH: '${PROCESS_DIR}/memory.jsonl' } }),
      [FILES]: stdio(process.execPath, [serverBin('@modelcontextprotocol/server-filesystem'), root]),
      [EVERYTHING]: stdio(process.execPath, [serverBin('@modelcontextprotocol/server-everything'), 'stdio']),
      [PROBE]: {
        ...stdio(process.execPath, [FIXTURE_SERVER, 'probe', '${PROCESS_DIR}'], {
          env: { PROBE_SECRET: { env: 'STDIO_TEST_SECRET' }, STATE: '${PROCESS_DIR}/state' },
          inherit_env: ['PATH', 'STDIO_TEST_PASSED'],
        }),
        rules: [
          { match: { method: 'tools/call', tool: 'delete_*' }, require_scopes: ['mcp:write'] },
          { match: { method: 'tools/call', tool: 'crash' }, deny: true },
        ],
        filter_tools_list: true,
      },
    },
    { STDIO_TEST_SECRET: 'from-a-secret', STDIO_TEST_PASSED: 'passed', STDIO_TEST_WITHHELD: 'withheld' },
  );
  // The gateway's own environment holds more than the child may see.
  process.env.STDIO_TEST_PASSED = 'passed';
  process.env.STDIO_TEST_WITHHELD = 'withheld';
  process.env.STDIO_TEST_SECRET = 'from-a-secret';
}, 60_000);

afterAll(async () => {
  await stage?.close();
  await rm(root, { recursive: true, force: true });
});

describe('server-memory (stdio): one process per session of one principal', () => {
  it("alice's entities are not bob's", async () => {
    const alice = await connectClient(stage.url(MEMORY), await stage.token(MEMORY, 'alice'));
    const bob = await connectClient(stage.url(MEMORY), await stage.token(MEMORY, 'bob'));
    try {
      await alice.client.callTool({ name: 'create_entities', arguments: { entities: [{ name: 'alice-secret', entityType: 'note', observations: ['only alice'] }] } });
      const aliceGraph = resultText(await alice.client.callTool({ name: 'read_graph', arguments: {} }));
      const bobGraph = resultText(await bob.client.callTool({ name: 'read_graph', arguments: {} }));
      expect(aliceGraph).toContain('alice-secret');
      expect(bobGraph).not.toContain('alice-secret');
    } finally {
      await Promise.all([alice.client.close(), bob.client.close()]);
    }
  });
});

describe('the same tools and results as a direct stdio connection', () => {
  it('server-everything: tools/list and tools/call through the gateway equal a direct StdioClientTransport', async () => {
    const direct = new Client({ name: 'direct', version: '1' });
    await direct.connect(new StdioClientTransport({ command: process.execPath, args: [serverBin('@modelcontextprotocol/server-everything'), 'stdio'], stderr: 'ignore' }));
    const via = await connectClient(stage.url(EVERYTHING), await stage.token(EVERYTHING));
    try {
      const [directTools, viaTools] = await Promise.all([direct.listTools(), via.client.listTools()]);
      expect(viaTools.tools.map((t) => t.name).sort()).toEqual(directTools.tools.map((t) => t.name).sort());
      expect(viaTools).toEqual(directTools);
      const echo = { name: 'echo', arguments: { message: 'through the gateway' } };
      expect(await via.client.callTool(echo)).toEqual(await direct.callTool(echo));
      const sum = { name: directTools.tools.find((t) => /sum|add/.test(t.name))!.name, arguments: { a: 2, b: 40 } };
      expect(await via.client.callTool(sum)).toEqual(await direct.callTool(sum));
    } finally {
      await Promise.all([direct.close(), via.client.close()]);
    }
  });

  it('server-filesystem (a temp root): reads the file the direct connection reads', async () => {
    const direct = new Client({ name: 'direct', version: '1' });
    await direct.connect(new StdioClientTransport({ command: process.execPath, args: [serverBin('@modelcontextprotocol/server-filesystem'), root], stderr: 'ignore' }));
    const via = await connectClient(stage.url(FILES), await stage.token(FILES));
    try {
      const read = { name: 'read_text_file', arguments: { path: join(root, 'hello.txt') } };
      const viaResult = await via.client.callTool(read);
      expect(resultText(viaResult)).toContain('hello from the temp root');
      expect(viaResult).toEqual(await direct.callTool(read));
      expect((await via.client.listTools()).tools.map((t) => t.name).sort()).toEqual((await direct.listTools()).tools.map((t) => t.name).sort());
    } finally {
      await Promise.all([direct.close(), via.client.close()]);
    }
  });
});
