// The one translator: whatever was thrown, the GatewayError the client gets.
// Both paths use it — the raw Node one (protected routes) and Hono's (the
// authorization server, well-known, operations) — so a domain error means
// the same answer wherever it surfaces.
import { RequestError } from '@hono/node-server';
import { StoreUnavailableError } from '../store/store.js';
import { GatewayError, temporarilyUnavailable } from './gateway-error.js';

/** What a site may say in its own words; the status, code and headers stay the translator's. */
export interface ErrorContext {
  /** The 503's description when the store cannot answer (which service is unavailable). */
  storeUnavailable?: string;
}

const STORE_UNAVAILABLE = 'The service is temporarily unavailable';

export function toGatewayError(thrown: unknown, context: ErrorContext = {}): GatewayError {
  // Anything else is a fault of ours: an opaque 500, the cause for the logs only.
  return translateKnown(thrown, context) ?? new GatewayError(500, 'server_error', 'Internal error', { cause: thrown });
}

/**
 * The answer to an error the gateway expects (typed or domain); undefined for
 * a fault, so a site that gives faults a meaning of its own (an IdP that
 * failed: 502) still leaves known errors to the translator.
 */
export function translateKnown(thrown: unknown, context: ErrorContext = {}): GatewayError | undefined {
  // Typed errors (a header mismatch with its JSON-RPC body among them) already say what they mean.
  if (thrown instanceof GatewayError) return thrown;
  if (thrown instanceof StoreUnavailableError) return temporarilyUnavailable(context.storeUnavailable ?? STORE_UNAVAILABLE, thrown);
  // The Node adapter could not make a request of it (a Host with obs-text, …): our JSON 400, not an empty one.
  if (thrown instanceof RequestError) return new GatewayError(400, 'invalid_request', 'Malformed request');
  return undefined;
}
