// Reads a request body into memory, bounded. The proxy buffers bodies (they
// are JSON-RPC messages the policy layer must read) and sends them with their
// own Content-Length. Slow-drip clients are cut by the server's own
// request/header timeouts, not here.
import type { IncomingMessage } from 'node:http';
import { GatewayError } from '../errors/gateway-error.js';

const EMPTY = Buffer.alloc(0);

// `connection: close`: the rest of the body is never read, so the connection
// cannot be reused; Node closes it once the 413 is written.
const tooLarge = (maxBytes: number) =>
  new GatewayError(413, 'payload_too_large', `Request body exceeds ${maxBytes} bytes`, {
    headers: { connection: 'close' },
  });

/**
 * Resolves with the whole body (empty when there is none). Rejects with 413
 * before reading when Content-Length is over `maxBytes`, and as soon as the
 * streamed bytes go over it; the request is then paused, not destroyed, so
 * the caller can still answer. Rejects when the client goes away or `signal` aborts.
 */
export function readBody(req: IncomingMessage, maxBytes: number, signal?: AbortSignal): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > maxBytes) return Promise.reject(tooLarge(maxBytes));
  // HTTP/1.1: a request with neither header has no body (RFC 9112 §6.3).
  if (declared === '0' || (declared === undefined && req.headers['transfer-encoding'] === undefined)) return Promise.resolve(EMPTY);
  if (signal?.aborted) return Promise.reject(signal.reason);
  // Already parsed while the caller waited (verifying a token): taken at once, without listeners.
  if (req.complete && !req.readableFlowing) {
    if (req.readableLength > maxBytes) return Promise.reject(tooLarge(maxBytes));
    return Promise.resolve((req.read() as Buffer | null) ?? EMPTY);
  }
  return streamedBody(req, maxBytes, signal);
}

function streamedBody(req: IncomingMessage, maxBytes: number, signal?: AbortSignal): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;

    const settle = (err: unknown, body?: Buffer) => {
      req.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose);
      signal?.removeEventListener('abort', onAbort);
      if (err === undefined) resolve(body!);
      else reject(err);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        req.pause();
        settle(tooLarge(maxBytes));
      } else chunks.push(chunk);
    };
    const onEnd = () => settle(undefined, chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    const onError = (err: Error) => settle(err);
    const onClose = () => settle(new Error('Client closed the connection before the body was complete'));
    const onAbort = () => settle(signal!.reason);

    req.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
