// Clients of 2026-07-28 have no session and send no `initialize`; the servers
// behind a stdio or legacy SSE route, written for earlier revisions, need one
// (the server is probed first: a modern one is spoken to as it is).
// So each principal gets one upstream session of its own (a process, an SSE
// stream), which the gateway initializes itself (the handshake's answer is
// kept from the client) before the first request reaches it; later requests
// of that principal go to the same session, and once it ended (idle, made
// room for another, the server gone) the next one opens another. Both
// transports take this file's handshake and per-principal map.
import { GatewayError } from '../errors/gateway-error.js';

/** The first revision without a handshake: what the gateway's probe of an upstream speaks. */
export const MODERN_PROTOCOL_VERSION = '2026-07-28';

/** UnsupportedProtocolVersionError (2026-07-28): only a modern server answers so. */
const UNSUPPORTED_PROTOCOL_VERSION = -32022;

/**
 * 2026-07-28's stdio era probe (versioning, "Backward Compatibility"): a
 * `server/discover` before anything else. A modern (or dual-era) server
 * answers it, and is then spoken to as the client speaks, with no
 * handshake; any other answer, or none, marks a legacy server.
 */
export const probeRequest = (id: string | number) => ({
  jsonrpc: '2.0' as const,
  id,
  method: 'server/discover',
  params: {
    _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN_PROTOCOL_VERSION, 'io.modelcontextprotocol/clientInfo': CLIENT_INFO, 'io.modelcontextprotocol/clientCapabilities': {} },
  },
});

/** Whether the answer to the probe comes from a modern server: a result, or the modern refusal of the version. */
export function isModernAnswer(message: { result?: unknown; error?: unknown }): boolean {
  if ('result' in message) return true;
  const error = message.error as { code?: unknown } | undefined;
  return error?.code === UNSUPPORTED_PROTOCOL_VERSION;
}

/** Waits for the answer to the gateway's probe: `done` resolves with it, or with undefined when none came within `timeoutMs`; rejects when the process failed. */
export class ProbeWait {
  readonly done: Promise<{ result?: unknown; error?: unknown } | undefined>;
  answer!: (message: { result?: unknown; error?: unknown }) => void;
  /** The probe was refused outright (an HTTP error to its POST): a legacy server, as one that does not answer. */
  refused!: () => void;
  fail!: (error: GatewayError) => void;

  constructor(timeoutMs: number) {
    this.done = new Promise((resolve, reject) => {
      const timer = setTimeout(() => resolve(undefined), timeoutMs);
      timer.unref();
      this.answer = (message) => (clearTimeout(timer), resolve(message));
      this.refused = () => (clearTimeout(timer), resolve(undefined));
      this.fail = (error) => (clearTimeout(timer), reject(error));
    });
  }
}

/** The newest revision that still has the handshake; a server that knows only older ones answers with its own. */
export const HANDSHAKE_PROTOCOL_VERSION = '2025-11-25';

const CLIENT_INFO = { name: 'mcp-auth-gateway', version: '1' };

/** The gateway's own initialize request, with the id its transport gives it. */
export const handshakeRequest = (id: string | number) => ({
  jsonrpc: '2.0' as const,
  id,
  method: 'initialize',
  params: { protocolVersion: HANDSHAKE_PROTOCOL_VERSION, capabilities: {}, clientInfo: CLIENT_INFO },
});

/** Sent once the initialize is answered. */
export const INITIALIZED_NOTIFICATION = { jsonrpc: '2.0' as const, method: 'notifications/initialized' };

/** Waits for the answer to the gateway's initialize: `done` resolves on a result, rejects with 502 on an error or a failure, 504 after `timeoutMs`. */
export class HandshakeWait {
  readonly done: Promise<void>;
  private settle!: (err?: GatewayError) => void;

  constructor(timeoutMs: number) {
    this.done = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => this.settle(new GatewayError(504, 'gateway_timeout', 'Upstream did not answer initialize in time')), timeoutMs);
      timer.unref();
      this.settle = (err) => {
        clearTimeout(timer);
        if (err === undefined) resolve();
        else reject(err);
      };
    });
  }

  /** The upstream's answer to the initialize. */
  answer(message: { error?: unknown }): void {
    this.settle('error' in message ? new GatewayError(502, 'bad_gateway', 'Upstream refused initialize') : undefined);
  }

  fail(error: GatewayError): void {
    this.settle(error);
  }
}

interface Entry<T> {
  ready: Promise<T>;
  session?: T;
}

/** One initialized session per principal, opened once (concurrent requests wait for the same one), opened again after it ended. */
export class StatelessSessions<T extends { readonly ended: boolean }> {
  private readonly entries = new Map<string, Entry<T>>();

  /** The principal's session; `open` starts and initializes one when it has none (and stops it itself when that fails). */
  get(owner: string, open: () => Promise<T>): Promise<T> {
    const known = this.entries.get(owner);
    if (known !== undefined && known.session?.ended !== true) return known.ready;
    const entry: Entry<T> = { ready: open() };
    this.entries.set(owner, entry);
    entry.ready.then(
      (session) => (entry.session = session),
      () => this.entries.get(owner) === entry && this.entries.delete(owner),
    );
    return entry.ready;
  }

  /** The session ended: forgotten, so the principal's next request opens another. */
  forget(owner: string, session: T): void {
    if (this.entries.get(owner)?.session === session) this.entries.delete(owner);
  }
}
