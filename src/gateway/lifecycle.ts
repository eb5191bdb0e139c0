// A gateway's life after it is built: listening, draining on SIGTERM and
// stopping at once. Draining is timed by configuration (drain_delay,
// shutdown_grace); the two short waits of its last step are named below.
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { GatewayConfig } from '../config/types.js';
import type { Logger } from '../observability/logger.js';
import type { Lifecycle } from '../routes/operations.js';
import { endForShutdown, type HttpServerHandle } from '../server.js';

/**
 * Once shutdown_grace is over, the forwarders are told to end their event
 * streams: each ends cleanly and lets its upstream connection go. This long
 * is left for that before what is still open is ended from outside.
 */
const STREAMS_END_MS = 100;
/**
 * Responses just ended get this long to flush their last bytes to the
 * client; then every socket still open is cut, so the server can close.
 */
const FLUSH_BEFORE_CUT_MS = 500;

export interface ShutdownParts {
  http: HttpServerHandle;
  readiness: Lifecycle;
  logger: Logger;
  /** Tells the current forwarders to end their event streams (and close their pools). */
  endStreams(): void;
  /** Closes the route table and the store the gateway owns: after the server has stopped. */
  closeAll(): Promise<void>;
}

/** Listens as configured; the URL to reach it (a wildcard address is reached on loopback). */
export async function listen(server: Server, config: Pick<GatewayConfig, 'port' | 'host'>): Promise<{ url: string; port: number }> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const reachable = host === '0.0.0.0' ? '127.0.0.1' : host === '[::]' ? '[::1]' : host;
  return { url: `http://${reachable}:${address.port}`, port: address.port };
}

/**
 * SIGTERM: not ready at once; new connections still served for `delayMs`
 * (load balancers catching up), then refused; in-flight requests finish;
 * whatever is still open `graceMs` later (event streams) is ended.
 */
export async function drain(parts: ShutdownParts, delayMs: number, graceMs: number): Promise<void> {
  const { http, logger } = parts;
  parts.readiness.ready = false;
  http.draining = true;
  logger.info({ delayMs, graceMs }, 'draining: not ready');
  // Endpoints take a few seconds to drop a pod that is not ready: keep serving what they still send.
  if (delayMs > 0) await sleep(delayMs);
  const stopped = new Promise<void>((resolve) => http.server.close(() => resolve()));
  http.server.closeIdleConnections();
  logger.info({ inFlight: http.inFlight.size }, 'draining: no new connections');
  let graceTimer: NodeJS.Timeout | undefined;
  const grace = new Promise<'grace'>((resolve) => (graceTimer = setTimeout(resolve, graceMs, 'grace')));
  const outcome = await Promise.race([stopped.then(() => 'done' as const), grace]);
  clearTimeout(graceTimer);
  if (outcome === 'grace') await endWhatIsOpen(parts, stopped);
  await parts.closeAll();
  logger.info('drained');
}

/** Grace is over: event streams never end on their own, so they are ended cleanly, then whatever else is open is answered or cut. */
async function endWhatIsOpen({ http, logger, endStreams }: ShutdownParts, stopped: Promise<void>): Promise<void> {
  logger.info({ inFlight: http.inFlight.size }, 'draining: grace period over, ending open responses');
  endStreams();
  await sleep(STREAMS_END_MS);
  for (const res of http.inFlight) endForShutdown(res);
  http.server.closeIdleConnections();
  setTimeout(() => http.server.closeAllConnections(), FLUSH_BEFORE_CUT_MS).unref();
  await stopped;
}

/** Immediate stop (tests): every connection cut now. */
export async function stop(parts: ShutdownParts): Promise<void> {
  parts.readiness.ready = false;
  const stopped = new Promise<void>((resolve) => parts.http.server.close(() => resolve()));
  parts.http.server.closeAllConnections();
  await stopped;
  await parts.closeAll();
}

// Not unref'd: while draining, a timer may be all that keeps the process alive until it is done.
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
