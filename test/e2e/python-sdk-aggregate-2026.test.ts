/**
 * The official Python SDK (mcp 2.3.0) as a 2026-07-28 client of an aggregated route (DESIGN §8.2,
 * issue 22 item 2): test/clients/python/aggregate_2026_client.py connects as the SDK does by
 * default, so the route's server/discover (naming 2026-07-28) makes it speak that revision without
 * a session; it lists the tools of the stateless 2026-07-28 fixture and of server-memory over stdio
 * under their shown names, calls one, has its own InputRequiredResult driver answer the fixture's
 * elicitation round through the route, and gets a tool list change on a `subscriptions/listen`
 * (the route's fan-out to the fixture's own listen). On a second route, in front of server-everything
 * (a session-based revision), test/clients/python/aggregate_2026_rounds_client.py has the SDK drive
 * the InputRequiredResults the gateway makes of the upstream's elicitation and sampling requests,
 * get a long call's progress on its callback, and hear a watched resource's update on a listen
 * (the gateway's `resources/subscribe` on the principal's upstream session).
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStatelessServer, type StatelessServer } from '../helpers/stateless-mcp-server.js';
import { serverBin, startStdioStage, type StdioStage } from '../helpers/stdio-stage.js';
import { startEverythingServer, type UpstreamHandle } from '../helpers/upstream.js';
import { ensurePythonSdk, venvPython } from '../tools/python-sdk.js';

const ROUTE = '/all/mcp';
const EVERYTHING = '/everything/mcp';
const DOC = 'demo://resource/static/document/architecture.md';
const script = new URL('../clients/python/aggregate_2026_client.py', import.meta.url).pathname;
const roundsScript = new URL('../clients/python/aggregate_2026_rounds_client.py', import.meta.url).pathname;
let modern: StatelessServer;
let everything: UpstreamHandle;
let stage: StdioStage;

beforeAll(async () => {
  ensurePythonSdk();
  [modern, everything] = await Promise.all([startStatelessServer({ keepAliveMs: 0 }), startEverythingServer()]);
  const memory = { upstream: { stdio: { command: process.execPath, args: [serverBin('@modelcontextprotocol/server-memory')], env: { MEMORY_FILE_PATH: '${PROCESS_DIR}/memory.jsonl' } } } };
  stage = await startStdioStage({ [ROUTE]: { upstreams: { modern: { upstream: modern.url }, memory } }, [EVERYTHING]: { upstreams: { everything: { upstream: everything.url } } } });
}, 120_000);
afterAll(async () => {
  await stage?.close();
  await Promise.allSettled([modern?.close(), everything?.close()]);
});

/** Runs the client to its end: its JSON events, its exit code and what it wrote to stderr. */
async function runClient(url: string, token: string, which = script, ...more: string[]): Promise<{ events: Record<string, unknown>[]; code: number | null; stderr: string }> {
  const child = spawn(venvPython, ['-u', which, url, token, ...more], { stdio: ['ignore', 'pipe', 'pipe'] });
  const events: Record<string, unknown>[] = [];
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  createInterface({ input: child.stdout }).on('line', (line) => events.push(JSON.parse(line) as Record<string, unknown>));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { events, code, stderr };
}

describe('the Python SDK as a 2026-07-28 client of an aggregated route', () => {
  it('speaks 2026-07-28 without a session: shown names listed and called, an InputRequiredResult round driven, a list change heard on its listen', async () => {
    const methodsBefore = modern.methods.length;
    const { events, code, stderr } = await runClient(stage.url(ROUTE), await stage.token(ROUTE));
    const report = JSON.stringify(events, null, 1) + stderr;
    expect(code, report).toBe(0);
    expect(events.find((e) => e.event === 'connected'), report).toMatchObject({ protocol_version: '2026-07-28' });
    expect((events.find((e) => e.event === 'tools')?.names as string[] | undefined) ?? [], report).toEqual(expect.arrayContaining(['modern__echo', 'modern__test_input_required_result_elicitation', 'memory__read_graph']));
    const calls = events.filter((e) => e.event === 'called');
    expect(calls, report).toEqual([
      { event: 'called', tool: 'modern__echo', is_error: false, text: ['echo'] },
      { event: 'called', tool: 'modern__test_input_required_result_elicitation', is_error: false, text: ['Hello, Ada'] },
    ]);
    expect(events.find((e) => e.event === 'elicitation'), report).toMatchObject({ message: 'What is your name?' });
    expect(events.find((e) => e.event === 'listening'), report).toMatchObject({ honored: { toolsListChanged: true } });
    expect(events.find((e) => e.event === 'changed'), report).toBeDefined();
    expect(events.at(-1)?.event, report).toBe('done');
    // The fixture was reached with its own names and without the route's session machinery: two rounds of the call, one listen.
    const reached = modern.methods.slice(methodsBefore);
    expect(reached.filter((m) => m === 'subscriptions/listen').length).toBe(1);
    expect(reached.filter((m) => m === 'tools/call').length).toBeGreaterThanOrEqual(4);
  }, 120_000);

  it("drives the InputRequiredResults the gateway makes of a session-based upstream's requests, gets a call's progress, and hears a watched resource of that upstream", async () => {
    const { events, code, stderr } = await runClient(stage.url(EVERYTHING), await stage.token(EVERYTHING), roundsScript, DOC);
    const report = JSON.stringify(events, null, 1) + stderr;
    expect(code, report).toBe(0);
    expect(events.find((e) => e.event === 'connected'), report).toMatchObject({ protocol_version: '2026-07-28' });
    expect(events.find((e) => e.event === 'elicitation'), report).toMatchObject({ message: expect.stringContaining('Please provide inputs') });
    expect(events.find((e) => e.event === 'sampling'), report).toBeDefined();
    const called = (tool: string) => events.find((e) => e.event === 'called' && e.tool === tool) as { is_error: boolean; text: string[]; progress?: number[][] } | undefined;
    expect(called('elicitation'), report).toMatchObject({ is_error: false });
    expect(called('elicitation')!.text.join(' '), report).toContain('Ada Lovelace');
    expect(called('sampling')!.text.join(' '), report).toContain('Paris');
    expect(called('long'), report).toMatchObject({ is_error: false, progress: [[1, 3], [2, 3], [3, 3]] });
    expect(events.find((e) => e.event === 'listening'), report).toMatchObject({ honored: { resourceSubscriptions: [DOC] } });
    expect(events.find((e) => e.event === 'updated'), report).toMatchObject({ uri: DOC });
    expect(events.at(-1)?.event, report).toBe('done');
  }, 120_000);
});
