import { expect } from 'vitest';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { parseJsonRpcBody } from '../../src/policy/json-rpc.js';

/** The GatewayError `promise` rejects with; fails the test if it resolves or rejects with anything else. */
export async function rejection(promise: Promise<unknown>): Promise<GatewayError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(GatewayError);
  return err as GatewayError;
}

/** What `run` throws, checked to be a `type` (a GatewayError unless told); fails the test if nothing is thrown. */
export function thrownBy<E = GatewayError>(run: () => unknown, type: abstract new (...args: never[]) => E = GatewayError as never): E {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(type);
    return err as E;
  }
  throw new Error(`nothing thrown by ${run.toString().slice(0, 200)}`);
}

/** How parseJsonRpcBody refuses `body`: a 400 invalid_request GatewayError; fails the test if it reads it. */
export function bodyRefusal(body: string | Buffer): GatewayError {
  const err = thrownBy(() => parseJsonRpcBody(typeof body === 'string' ? Buffer.from(body) : body));
  expect(err.status).toBe(400);
  expect(err.code).toBe('invalid_request');
  return err;
}
