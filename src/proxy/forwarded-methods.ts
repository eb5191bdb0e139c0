// The methods of MCP's Streamable HTTP transport, the only ones forwarded: one
// list for the protected route (which refuses the others before
// authentication) and the forwarder (which refuses them from any caller).
import { GatewayError } from '../errors/gateway-error.js';

export const FORWARDED_METHODS = ['GET', 'POST', 'DELETE'] as const;
export type ForwardedMethod = (typeof FORWARDED_METHODS)[number];

const FORWARDED = new Set<string>(FORWARDED_METHODS);

export const isForwardedMethod = (method: string | undefined): method is ForwardedMethod => method !== undefined && FORWARDED.has(method);

/** The Allow header's value: the forwarded methods, and `alsoAnswered` by the refusing layer itself (a route answers OPTIONS). */
export const allowHeader = (alsoAnswered: readonly string[] = []): string => [...FORWARDED_METHODS, ...alsoAnswered].join(', ');

/** 405 with Allow (see allowHeader). */
export function methodNotAllowed(alsoAnswered: readonly string[] = []): GatewayError {
  return new GatewayError(405, 'method_not_allowed', 'Method not allowed', { headers: { allow: allowHeader(alsoAnswered) } });
}
