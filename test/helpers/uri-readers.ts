/**
 * Real URI readers of three ecosystems, and what each resolves a resource URI
 * to: Node's WHATWG URL (with fileURLToPath for file:), Python's urllib.parse +
 * unquote + posixpath.normpath, Go's net/url + path.Clean (the last two as
 * long-running processes from test/security/fixtures/uri-readers/). A
 * `resource` is `scheme://host[:port]` + the decoded, normalised path: what
 * a server built on that reader would open or look up (the query is left out;
 * file://localhost counts as local, as file servers treat it).
 */
import { execFile, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const FIXTURES = new URL('../security/fixtures/uri-readers/', import.meta.url);

export interface UriReading {
  ok: boolean;
  /** The URI as the reader writes it back (WHATWG href, Python geturl(), Go String()). */
  serialized?: string;
  /** The decoded path before and after normalisation (Python, Go). */
  path?: string;
  normalized?: string;
  resource?: string;
}

export interface UriReader {
  readonly name: string;
  read(uri: string): Promise<UriReading>;
  close(): Promise<void>;
}

/** RFC 3986 Appendix B. */
const RFC3986 = /^(?:([^:/?#]+):)?(?:\/\/([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?$/;

/** What the policy judged, as a resource: the raw string's scheme, authority and percent-decoded path, nothing resolved. */
export function judgedResource(uri: string): string {
  const [, scheme, authority, path] = RFC3986.exec(uri)!;
  return `${scheme}://${authority ?? ''}${decodeURIComponent(path!)}`;
}

/** Node: WHATWG URL (as the TypeScript MCP SDK parses resource URIs) and fileURLToPath. */
export function nodeReading(uri: string): UriReading {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return { ok: false };
  }
  if (url.protocol === 'file:') {
    try {
      const path = fileURLToPath(url);
      return { ok: true, serialized: url.href, path, normalized: posix.normalize(path), resource: `file://${posix.normalize(path)}` };
    } catch {
      return { ok: false, serialized: url.href };
    }
  }
  let path: string;
  try {
    path = decodeURIComponent(url.pathname);
  } catch {
    return { ok: false, serialized: url.href };
  }
  const normalized = path === '' ? path : posix.normalize(path);
  return { ok: true, serialized: url.href, path, normalized, resource: `${url.protocol}//${url.host}${normalized}` };
}

function lineReader(name: string, child: ChildProcessWithoutNullStreams, toReading: (raw: Record<string, unknown>) => UriReading, cleanup: () => Promise<void> = async () => undefined): UriReader {
  const waiting: Array<{ resolve: (a: UriReading) => void; reject: (e: Error) => void }> = [];
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  createInterface({ input: child.stdout }).on('line', (line) => waiting.shift()?.resolve(toReading(JSON.parse(line) as Record<string, unknown>)));
  child.once('exit', (code) => {
    for (const w of waiting.splice(0)) w.reject(new Error(`${name} reader exited (${code}): ${stderr.slice(0, 500)}`));
  });
  return {
    name,
    read: (uri) =>
      new Promise<UriReading>((resolve, reject) => {
        waiting.push({ resolve, reject });
        child.stdin.write(`${JSON.stringify(uri)}\n`);
      }),
    async close() {
      child.stdin.end();
      if (child.exitCode === null) await new Promise((r) => child.once('exit', r));
      await cleanup();
    },
  };
}

export function startPythonUriReader(): UriReader {
  const child = spawn('python3', [new URL('reader.py', FIXTURES).pathname], { stdio: 'pipe' });
  return lineReader('python urllib', child, (raw) =>
    raw.ok ? { ok: true, serialized: raw.geturl as string, path: raw.path as string, normalized: raw.normalized as string, resource: raw.resource as string } : { ok: false },
  );
}

/** Go is needed (CI installs Debian's golang-go); undefined when `go` is not on PATH. */
export async function startGoUriReader(): Promise<UriReader | undefined> {
  const run = promisify(execFile);
  if (!(await run('go', ['version']).then(() => true, () => false))) return undefined;
  const dir = await mkdtemp(join(tmpdir(), 'mag-go-uri-reader-'));
  const binary = join(dir, 'reader');
  // Built outside the repository: no go.mod is looked for, nothing is written into the checkout.
  await run('go', ['build', '-o', binary, new URL('reader.go', FIXTURES).pathname], { cwd: dir, env: { ...process.env, GO111MODULE: 'off' }, timeout: 120_000 });
  const child = spawn(binary, [], { stdio: 'pipe' });
  return lineReader(
    'go net/url',
    child,
    (raw) => (raw.ok ? { ok: true, serialized: raw.string as string, path: raw.path as string, normalized: raw.cleaned as string, resource: raw.resource as string } : { ok: false }),
    () => rm(dir, { recursive: true, force: true }),
  );
}
