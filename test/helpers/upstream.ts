/**
 * Upstream MCP servers for integration tests: the unmodified reference "everything" server,
 * and a recording hop that proves what actually reaches an upstream.
 */
import { spawn } from 'node:child_process';
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import { closeServer, freePort, listen } from './net.js';

export interface UpstreamHandle {
  /** e.g. `http://127.0.0.1:PORT/mcp` */
  url: string;
  close(): Promise<void>;
}

const everythingEntry = createRequire(import.meta.url).resolve('@modelcontextprotocol/server-everything/dist/index.js');

/** How server-everything says it is up, and where it is reached, per transport. */
const EVERYTHING_MODES = {
  streamableHttp: { ready: (port: number) => `listening on port ${port}`, path: '/mcp' },
  // The legacy HTTP+SSE transport (2024-11-05): GET /sse, then POST to the endpoint it names.
  sse: { ready: (port: number) => `Server is running on port ${port}`, path: '/sse' },
} as const;

/**
 * Spawns `@modelcontextprotocol/server-everything streamableHttp` (or `sse`) (it reads only `PORT`, binds all
 * interfaces and cannot report a port it picked itself, so a free port is chosen first; retried on a race).
 * `atPort` starts it on that port instead (retried while the port is still held).
 */
export async function startEverythingServer(mode: keyof typeof EVERYTHING_MODES = 'streamableHttp', atPort?: number): Promise<UpstreamHandle> {
  const { ready: readyLine, path } = EVERYTHING_MODES[mode];
  for (let attempt = 1; ; attempt++) {
    // `atPort`: started again where a killed one was (its clients reconnect to the same URL).
    const port = atPort ?? (await freePort());
    const child = spawn(process.execPath, [everythingEntry, mode], {
      env: { ...process.env, PORT: String(port) },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    const ready = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), 15_000);
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
        stderr += chunk;
        if (stderr.includes(readyLine(port))) {
          clearTimeout(timer);
          resolve(true);
        }
      });
      child.once('exit', () => {
        clearTimeout(timer);
        resolve(false);
      });
    });
    if (ready) {
      child.stderr.resume(); // keep draining its logs
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      return {
        url: `http://127.0.0.1:${port}${path}`,
        close: async () => {
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
          await exited;
        },
      };
    }
    child.kill('SIGKILL');
    if (attempt >= 3 || !stderr.includes('EADDRINUSE') && !stderr.includes('already in use')) {
      throw new Error(`server-everything did not start:\n${stderr}`);
    }
  }
}

export interface RecordedRequest {
  method: string;
  /** path + query as received */
  url: string;
  /** raw header pairs as received (name casing and duplicates preserved) */
  headers: Array<[string, string]>;
  body: Buffer;
}

export interface RecordingHop extends UpstreamHandle {
  requests: RecordedRequest[];
  /** all values of a header (case-insensitive) over every recorded request */
  headerValues(name: string): string[];
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer']);

function forwardable(raw: string[], host?: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (HOP_BY_HOP.has(name) || (host && name === 'host')) continue;
    out.push(raw[i]!, raw[i + 1]!);
  }
  if (host) out.push('Host', host);
  return out;
}

/**
 * A reverse hop: records every request (method, path+query, raw headers, body) and forwards it
 * unchanged (except `Host` and hop-by-hop headers) to `target`'s origin with the same path+query,
 * streaming the response back chunk by chunk (SSE is never buffered).
 * `url` is the hop's origin + `target`'s path + query, i.e. a drop-in replacement for `target`.
 */
export async function startRecordingHop(target: string): Promise<RecordingHop> {
  const upstream = new URL(target);
  const requests: RecordedRequest[] = [];

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    const headers: Array<[string, string]> = [];
    for (let i = 0; i < req.rawHeaders.length; i += 2) headers.push([req.rawHeaders[i]!, req.rawHeaders[i + 1]!]);

    const out = httpRequest({
      host: upstream.hostname,
      port: upstream.port,
      method: req.method,
      path: req.url,
      headers: forwardable(req.rawHeaders, upstream.host),
    });
    out.on('response', (upRes) => {
      res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, forwardable(upRes.rawHeaders));
      res.flushHeaders();
      upRes.pipe(res);
      // The server went away mid-answer (killed): its client sees the connection end too, as without the hop.
      upRes.on('close', () => {
        if (!upRes.complete) res.destroy();
      });
    });
    out.on('error', (err) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' }).end(`hop: ${err.message}`);
      else res.destroy();
    });
    res.on('close', () => {
      if (!res.writableFinished) out.destroy(); // the client went away mid-stream
    });

    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => requests.push({ method: req.method ?? '', url: req.url ?? '', headers, body: Buffer.concat(chunks) }));
    req.pipe(out);
  });

  const port = await listen(server);
  return {
    url: `http://127.0.0.1:${port}${upstream.pathname}${upstream.search}`,
    requests,
    headerValues: (name) =>
      requests.flatMap((r) => r.headers.filter(([n]) => n.toLowerCase() === name.toLowerCase()).map(([, v]) => v)),
    close: () => closeServer(server),
  };
}
