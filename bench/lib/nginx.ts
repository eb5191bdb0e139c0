// Baseline: Debian's nginx as a plain reverse proxy without authentication,
// one worker (as the gateway is one process), upstream keep-alive on. Skipped
// with a note when nginx is not installed.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect, createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnReady, type ChildHandle } from './processes.js';

export interface NginxBinary {
  path: string;
  version: string;
}

/** The nginx binary on PATH or in /usr/sbin (Debian puts it there, outside a normal user's PATH). */
export function findNginx(): NginxBinary | undefined {
  const candidates = [...(process.env.PATH ?? '').split(':').map((dir) => join(dir, 'nginx')), '/usr/sbin/nginx'];
  const path = candidates.find((candidate) => existsSync(candidate));
  if (!path) return undefined;
  // `nginx -v` prints to stderr.
  const probe = spawnSync(path, ['-v'], { encoding: 'utf8' });
  if (probe.status !== 0) return undefined;
  return { path, version: probe.stderr.trim().replace(/^nginx version: (nginx\/)?/, '') || 'unknown' };
}

export interface NginxProcess extends ChildHandle {
  port: number;
}

export async function startNginx(binary: NginxBinary, upstreamPort: number): Promise<NginxProcess> {
  const dir = await mkdtemp(join(tmpdir(), 'mag-bench-nginx-'));
  // nginx cannot report a port it picked: take a free one, retry on a race.
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    await writeFile(join(dir, 'nginx.conf'), config(dir, port, upstreamPort));
    try {
      const handle = await spawnReady('nginx', binary.path, ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'error.log')], {
        probe: () => canConnect(port),
        readyTimeoutMs: 10_000,
      });
      const stopProcess = handle.stop;
      return Object.assign(handle, {
        port,
        async stop(signal?: NodeJS.Signals) {
          await stopProcess(signal);
          await rm(dir, { recursive: true, force: true });
        },
      });
    } catch (err) {
      if (attempt >= 3) {
        await rm(dir, { recursive: true, force: true });
        throw err;
      }
    }
  }
}

function config(dir: string, port: number, upstreamPort: number): string {
  return `
worker_processes 1;
worker_rlimit_nofile 65536;
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 16384; }
http {
  access_log off;
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  # As the Node proxies: no forced reconnect every 1000 requests.
  keepalive_requests 1000000;
  upstream mcp {
    server 127.0.0.1:${upstreamPort};
    keepalive 64;
    keepalive_requests 1000000;
  }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://mcp;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      # No auth, but the client's token goes no further, as through the gateway.
      proxy_set_header Authorization "";
    }
  }
}
`;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function canConnect(port: number): Promise<true | undefined> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(undefined));
  });
}
