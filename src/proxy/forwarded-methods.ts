// The methods of MCP's Streamable HTTP transport, the only ones forwarded: one
// list for the protected route (which refuses the others before
// authentication) and the forwarder (which refuses them from any caller).
import { GatewayError } from '../errors/gateway-error.js';

export const FORWARDED_METHODS = ['GET', 'POST', 'DELETE'] as const;
export type ForwardedMethod = (typeof FORWARDED_METHODS)[number];

const FORWARDED = new Set<string>(FORWARDED_METHODS);

export const isForwardedMethod = (method: string | undefined): method is ForwardedMethod => method !== undefined && FORWARDED.has(method);

/** 405 with Allow: the forwarded methods, and `alsoAnswered` by the refusing layer itself (a route answers OPTIONS). */
export function methodNotAllowed(alsoAnswered: readonly string[] = []): GatewayError {
  const allow = [...FORWARDED_METHODS, ...alsoAnswered].join(', ');
  return new GatewayError(405, 'method_not_allowed', 'Method not allowed', { headers: { allow } });
}
