import { GatewayError } from '../errors/gateway-error.js';

/** 502 for the client; the cause (token endpoint error, timeout) goes to the logs only. */
export const upstreamCredentialFailed = (cause: unknown) =>
  new GatewayError(502, 'bad_gateway', 'could not obtain an upstream credential', { cause });

/** Lets one caller stop waiting for a shared fetch without cancelling it for the others. */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
