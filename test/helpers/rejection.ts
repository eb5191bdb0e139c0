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

/** How parseJsonRpcBody refuses `body`: a 400 invalid_request GatewayError; fails the test if it reads it. */
export function bodyRefusal(body: string | Buffer): GatewayError {
  try {
    parseJsonRpcBody(typeof body === 'string' ? Buffer.from(body) : body);
  } catch (err) {
    expect(err).toBeInstanceOf(GatewayError);
    expect((err as GatewayError).status).toBe(400);
    expect((err as GatewayError).code).toBe('invalid_request');
    return err as GatewayError;
  }
  throw new Error(`not refused: ${body.toString().slice(0, 200)}`);
}
