/**
 * Readers of other ecosystems as long-running processes: a fixture folder's
 * reader.py (run by python3) and reader.go (built with `go build`). Each takes
 * one line per input and answers one JSON line, in order. json-readers.ts and
 * uri-readers.ts say what goes in and what each answer means.
 */
import { execFile, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';

export interface ReaderProcess<In, Out> {
  readonly name: string;
  read(input: In): Promise<Out>;
  close(): Promise<void>;
}

/** One reader's name and how its JSON answer becomes what the tests compare. */
export interface ReaderSpec<Out> {
  name: string;
  decode(answer: Record<string, unknown>): Out;
}

export interface ReaderPair<In, Out> {
  python: ReaderProcess<In, Out>;
  /** Undefined when `go` is not on PATH (CI installs Debian's golang-go). */
  go: ReaderProcess<In, Out> | undefined;
}

/** Starts the Python reader and, when Go is installed, the Go reader of `fixtures`; warns when Go is skipped. */
export async function startReaders<In, Out>(fixtures: URL, encode: (input: In) => string, python: ReaderSpec<Out>, go: ReaderSpec<Out>): Promise<ReaderPair<In, Out>> {
  const pythonReader = lineReader(python, encode, spawn('python3', [new URL('reader.py', fixtures).pathname], { stdio: 'pipe' }));
  const goReader = await startGoReader(fixtures, encode, go);
  if (!goReader) console.warn('[J47] `go` is not installed: the Go reader is skipped here (CI installs golang-go)');
  return { python: pythonReader, go: goReader };
}

async function startGoReader<In, Out>(fixtures: URL, encode: (input: In) => string, spec: ReaderSpec<Out>): Promise<ReaderProcess<In, Out> | undefined> {
  const run = promisify(execFile);
  if (!(await run('go', ['version']).then(() => true, () => false))) return undefined;
  const dir = await mkdtemp(join(tmpdir(), 'mag-go-reader-'));
  const binary = join(dir, 'reader');
  // Built outside the repository: no go.mod is looked for, nothing is written into the checkout.
  await run('go', ['build', '-o', binary, new URL('reader.go', fixtures).pathname], { cwd: dir, env: { ...process.env, GO111MODULE: 'off' }, timeout: 120_000 });
  return lineReader(spec, encode, spawn(binary, [], { stdio: 'pipe' }), () => rm(dir, { recursive: true, force: true }));
}

function lineReader<In, Out>(spec: ReaderSpec<Out>, encode: (input: In) => string, child: ChildProcessWithoutNullStreams, cleanup: () => Promise<void> = async () => undefined): ReaderProcess<In, Out> {
  const waiting: Array<{ resolve: (answer: Out) => void; reject: (e: Error) => void }> = [];
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  createInterface({ input: child.stdout }).on('line', (line) => waiting.shift()?.resolve(spec.decode(JSON.parse(line) as Record<string, unknown>)));
  child.once('exit', (code) => {
    for (const w of waiting.splice(0)) w.reject(new Error(`${spec.name} reader exited (${code}): ${stderr.slice(0, 500)}`));
  });
  return {
    name: spec.name,
    read: (input) =>
      new Promise<Out>((resolve, reject) => {
        waiting.push({ resolve, reject });
        child.stdin.write(`${encode(input)}\n`);
      }),
    async close() {
      child.stdin.end();
      if (child.exitCode === null) await new Promise((r) => child.once('exit', r));
      await cleanup();
    },
  };
}
