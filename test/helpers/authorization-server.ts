/**
 * Helpers for tests of the built-in authorization server: a gateway with the AS on a real loopback
 * port (public_url = where it listens, so the SDK's discovery works), a store that records every
 * write (to assert "nothing was stored"), and a headless user that submits the consent and dev
 * login forms.
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { MemoryStore } from '../../src/store/memory-store.js';
import type { AdmitRequest, Store } from '../../src/store/store.js';
import type { AuthorizationServerOptions } from '../../src/authorization-server/index.js';
import type { Audit, AuditEvent } from '../../src/observability/audit.js';
import { startTestGateway, type ConfigFiles, type TestGateway } from './gateway.js';
import { devAuthorizationServer, originYaml, type Origin } from './gateway-config.js';
export { decodeEntities, headlessUser, parseForm, type HeadlessUserLog } from './headless-user.js';
import { getManual } from './oauth-requests.js';
import { startEverythingServer } from './upstream.js';

/** A real MemoryStore that remembers which keys were written (set, setIfAbsent that wrote). */
export class RecordingStore implements Store {
  readonly kind = 'memory' as const;
  readonly writes: Array<{ key: string; ttlMs: number; value: string }> = [];
  private readonly inner = new MemoryStore({ maxEntries: 100_000 });

  get(key: string) {
    return this.inner.get(key);
  }
  async set(key: string, value: string, ttlMs: number) {
    this.writes.push({ key, ttlMs, value });
    await this.inner.set(key, value, ttlMs);
  }
  async setIfAbsent(key: string, value: string, ttlMs: number) {
    const wrote = await this.inner.setIfAbsent(key, value, ttlMs);
    if (wrote) this.writes.push({ key, ttlMs, value });
    return wrote;
  }
  async compareAndSet(key: string, expected: string | undefined, next: string | undefined, ttlMs: number) {
    const wrote = await this.inner.compareAndSet(key, expected, next, ttlMs);
    if (wrote && next !== undefined) this.writes.push({ key, ttlMs, value: next });
    return wrote;
  }
  take(key: string) {
    return this.inner.take(key);
  }
  /** Rate-limit counters: not recorded, they hold no request data ("nothing stored" means none of it). */
  increment(key: string, ttlMs: number) {
    return this.inner.increment(key, ttlMs);
  }
  /** Route rate-limit windows: not recorded either, for the same reason. */
  admit(key: string, request: AdmitRequest) {
    return this.inner.admit(key, request);
  }
  delete(key: string) {
    return this.inner.delete(key);
  }
  async appendToLog(key: string, member: string, retentionMs: number) {
    this.writes.push({ key, ttlMs: retentionMs, value: member });
    await this.inner.appendToLog(key, member, retentionMs);
  }
  readLog(key: string, sinceMs: number) {
    return this.inner.readLog(key, sinceMs);
  }
  ping() {
    return this.inner.ping();
  }
  close() {
    return this.inner.close();
  }
  /** Every key and value ever written, as one string (to assert a secret never reached the store). */
  dump(): string {
    return this.writes.map((w) => `${w.key} ${w.value}`).join('\n');
  }
  /** The key namespaces written since `mark` (a previous `writes.length`). */
  namespacesSince(mark: number): string[] {
    return this.writes.slice(mark).map(({ key }) => key.split(':')[0] as string);
  }
}

export interface AsGatewayOptions {
  /** Route files (name → object); `upstream` is filled in where missing. */
  routes?: Record<string, Record<string, unknown>>;
  upstream: string;
  /** Merged into `authorization_server`. */
  authorizationServer?: Record<string, unknown>;
  gateway?: Record<string, unknown>;
  options?: AuthorizationServerOptions;
  env?: NodeJS.ProcessEnv;
  /** Where audit events go (default: nowhere). */
  audit?: Audit;
}

export interface AsGateway extends TestGateway {
  recording: RecordingStore;
  /** `http://127.0.0.1:<port>` = public_url = issuer. */
  issuer: string;
}

export const DEFAULT_ROUTE = {
  path: '/everything/mcp',
  scopes_supported: ['mcp:read', 'mcp:write', 'mcp:admin'],
  required_scopes: ['mcp:read'],
};

export async function startAsGateway(opts: AsGatewayOptions): Promise<AsGateway> {
  const recording = new RecordingStore();
  let issuer = '';
  const files = (origin: Origin) => {
    issuer = origin.url;
    const files: ConfigFiles = {
      'gateway.yaml': originYaml(origin, { log_level: 'warn', authorization_server: devAuthorizationServer(opts.authorizationServer), ...opts.gateway }),
    };
    for (const [name, route] of Object.entries(opts.routes ?? { 'everything.yaml': DEFAULT_ROUTE })) {
      files[name] = { upstream: opts.upstream, ...route };
    }
    return files;
  };
  const gateway = await startTestGateway(files, opts.env, {
    store: recording,
    ...(opts.audit && { audit: opts.audit }),
    ...(opts.options && { authorizationServer: opts.options }),
  });
  return Object.assign(gateway, { recording, issuer });
}

/**
 * The built-in AS (dev login) in front of server-everything, on the gateway's own memory store
 * bounded to `maxEntries` as configured (startAsGateway's recording store has no budget): for
 * floods that must not evict what others hold. `gateway` is merged into gateway.yaml.
 */
export async function startBoundedAsGateway(maxEntries: number, gateway: Record<string, unknown> = {}): Promise<{ issuer: string; stop(): Promise<void> }> {
  const everything = await startEverythingServer();
  const files = (origin: Origin) => ({
    'gateway.yaml': originYaml(origin, { store: { kind: 'memory', max_entries: maxEntries }, log_level: 'warn', authorization_server: devAuthorizationServer(), ...gateway }),
    'everything.yaml': { path: '/everything/mcp', upstream: everything.url, scopes_supported: ['mcp:read', 'mcp:write'], required_scopes: ['mcp:read'] },
  });
  const started = await startTestGateway(files).catch(async (err: unknown) => {
    await everything.close();
    throw err;
  });
  return {
    issuer: started.url,
    async stop() {
      await started.stop();
      await everything.close();
    },
  };
}

/** A throwaway self-signed certificate for 127.0.0.1 and localhost (openssl), for https test servers. */
export async function selfSignedCertificate(): Promise<{ key: string; cert: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'mag-tls-'));
  try {
    const keyFile = join(dir, 'key.pem');
    const certFile = join(dir, 'cert.pem');
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
      '-keyout', keyFile, '-out', certFile, '-days', '1', '-subj', '/CN=localhost',
      '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost',
    ], { stdio: 'ignore' });
    return { key: await readFile(keyFile, 'utf8'), cert: await readFile(certFile, 'utf8') };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** An Audit that keeps its events. */
export function recordingAudit(): Audit & { events: AuditEvent[] } {
  const events: AuditEvent[] = [];
  return { enabled: true, events, record: (event) => void events.push(event) };
}

/** An /authorize refusal shown to the user: a 400 HTML page, no redirect, no cookie, nothing stored. Returns the page. */
export async function expectAuthorizeErrorPage(gw: AsGateway, url: URL) {
  const mark = gw.recording.writes.length;
  const res = await getManual(url);
  expect(res.status, `${url.search}: ${res.body.slice(0, 300)}`).toBe(400);
  expect(res.headers.get('location')).toBeNull();
  expect(res.headers.get('content-type')).toMatch(/^text\/html/);
  expect(res.headers.get('set-cookie')).toBeNull();
  expect(gw.recording.writes.slice(mark)).toEqual([]);
  return res;
}
