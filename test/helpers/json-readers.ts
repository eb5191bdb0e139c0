/**
 * Real JSON readers of other ecosystems, as long-running processes: Python's
 * `json` (dict access) and Go's `encoding/json` (struct decoding), from
 * test/security/fixtures/json-readers/. Each reads one base64 body per line and
 * answers one JSON line with what a server built on it would see. Used to check
 * that whatever the gateway forwards means the same to all of them.
 */
import { execFile, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { NAME_MEMBER, idKey, idOf, type JsonRpcMessage, type ParsedRequest } from '../../src/policy/json-rpc.js';

const FIXTURES = new URL('../security/fixtures/json-readers/', import.meta.url);

/** What one reader sees in one message; `id` as that reader would echo it (JSON text), null when absent. */
export interface ReaderMessage {
  method: string | null;
  name: string | null;
  uri: string | null;
  id: string | null;
}

export interface ReaderAnswer {
  ok: boolean;
  error?: string;
  batch: boolean;
  messages: ReaderMessage[];
}

export interface JsonReader {
  readonly name: string;
  read(body: Buffer): Promise<ReaderAnswer>;
  close(): Promise<void>;
}

function lineReader(name: string, child: ChildProcessWithoutNullStreams, cleanup: () => Promise<void> = async () => undefined): JsonReader {
  const waiting: Array<{ resolve: (a: ReaderAnswer) => void; reject: (e: Error) => void }> = [];
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  createInterface({ input: child.stdout }).on('line', (line) => waiting.shift()?.resolve(JSON.parse(line) as ReaderAnswer));
  child.once('exit', (code) => {
    for (const w of waiting.splice(0)) w.reject(new Error(`${name} reader exited (${code}): ${stderr.slice(0, 500)}`));
  });
  return {
    name,
    read: (body) =>
      new Promise<ReaderAnswer>((resolve, reject) => {
        waiting.push({ resolve, reject });
        child.stdin.write(`${body.toString('base64')}\n`);
      }),
    async close() {
      child.stdin.end();
      if (child.exitCode === null) await new Promise((r) => child.once('exit', r));
      await cleanup();
    },
  };
}

export function startPythonReader(): JsonReader {
  const child = spawn('python3', [new URL('reader.py', FIXTURES).pathname], { stdio: 'pipe' });
  return lineReader('python json', child);
}

/** Go is needed (CI installs Debian's golang-go); undefined when `go` is not on PATH. */
export async function startGoReader(): Promise<JsonReader | undefined> {
  const go = await promisify(execFile)('go', ['version']).then(
    () => true,
    () => false,
  );
  if (!go) return undefined;
  const dir = await mkdtemp(join(tmpdir(), 'mag-go-reader-'));
  const binary = join(dir, 'reader');
  // Built outside the repository: no go.mod is looked for, nothing is written into the checkout.
  await promisify(execFile)('go', ['build', '-o', binary, new URL('reader.go', FIXTURES).pathname], { cwd: dir, env: { ...process.env, GO111MODULE: 'off' }, timeout: 120_000 });
  const child = spawn(binary, [], { stdio: 'pipe' });
  return lineReader('go encoding/json', child, () => rm(dir, { recursive: true, force: true }));
}

/** What the gateway judged in each message, in the readers' terms. */
export function gatewayReading(request: ParsedRequest): ReaderMessage[] {
  return request.messages.map((message: JsonRpcMessage) => {
    const method = typeof message.method === 'string' ? message.method : null;
    const member = method === null ? undefined : NAME_MEMBER[method];
    const params = (typeof message.params === 'object' && message.params !== null ? message.params : {}) as Record<string, unknown>;
    const id = idOf(message);
    return {
      method,
      name: member === 'name' ? (params.name as string) : null,
      uri: member === 'uri' ? (params.uri as string) : null,
      id: 'id' in message && id !== undefined ? idKey(id) : null,
    };
  });
}

/**
 * A reader's view reduced to what the gateway judges: the method, the name
 * the method carries (Go reads "" for a missing string), and the id by type
 * and value (as idKey compares them).
 */
export function comparable(answer: ReaderAnswer): ReaderMessage[] {
  return answer.messages.map((m) => {
    const method = m.method === '' ? null : m.method;
    const member = method === null ? undefined : NAME_MEMBER[method];
    return {
      method,
      name: member === 'name' ? m.name : null,
      uri: member === 'uri' ? m.uri : null,
      id: m.id === null ? null : idText(m.id),
    };
  });
}

/** An id's JSON text by type and value; text no JSON reader here takes (Python's `Infinity`) stays apart. */
function idText(text: string): string {
  try {
    return idKey(JSON.parse(text) as string | number | null);
  } catch {
    return `raw:${text}`;
  }
}
