// The values of a route's `identity_headers` for one request, from the
// verified token only (the AuthContext: never a request header). A value is
// sent as it is or not at all: one that is not printable ASCII (a control
// character, CR/LF, a non-ASCII name), a list element holding the `,` that
// joins the list, or an object refuses the request with 403 instead of being
// encoded, cut or guessed at. An absent claim sends no header; the client's
// copy is removed either way (proxy/headers.ts, `strip`).
import type { AuthContext } from '../auth/principal.js';
import type { IdentityHeader } from '../config/identity-headers.js';
import { GatewayError } from '../errors/gateway-error.js';

/** RFC 9110 §5.5 field-value, restricted to what every server reads alike: visible ASCII and inner spaces. */
const HEADER_VALUE = /^[\x21-\x7E]([\x20-\x7E]*[\x21-\x7E])?$/;
/** Longest value sent: a claim is not a payload. */
const MAX_VALUE_LENGTH = 4096;

function sourceValue(auth: AuthContext, from: readonly string[]): unknown {
  const [first, ...path] = from;
  if (first === 'sub') return auth.subject;
  if (first === 'iss') return auth.issuer;
  if (first === 'client_id') return auth.clientId || undefined;
  if (first === 'scope') return auth.scopes.join(' ');
  let value: unknown = auth.claims;
  for (const key of path) value = typeof value === 'object' && value !== null && !Array.isArray(value) && Object.hasOwn(value, key) ? (value as Record<string, unknown>)[key] : undefined;
  return value;
}

const scalar = (value: unknown): string | undefined => (typeof value === 'string' ? value : typeof value === 'number' || typeof value === 'boolean' ? String(value) : undefined);

/** The header value of one claim, undefined when it is absent; throws 403 when it cannot be one. */
function headerValue(header: IdentityHeader, value: unknown): string | undefined {
  if (value === undefined || value === null || (Array.isArray(value) && value.length === 0)) return undefined;
  const parts = Array.isArray(value) ? value.map(scalar) : [scalar(value)];
  const refuse = () => new GatewayError(403, 'access_denied', `The token's ${header.from.join('.')} cannot be sent to the upstream as the ${header.name} header`);
  if (parts.some((part) => part === undefined || (Array.isArray(value) && part.includes(',')))) throw refuse();
  const text = (parts as string[]).join(',');
  if (text.length > MAX_VALUE_LENGTH || !HEADER_VALUE.test(text)) throw refuse();
  return text;
}

/** Lower-case name → value for every configured header whose source the token carries. */
export function identityHeaderValues(headers: readonly IdentityHeader[], auth: AuthContext): Record<string, string> {
  const out: Record<string, string> = {};
  for (const header of headers) {
    const value = headerValue(header, sourceValue(auth, header.from));
    if (value !== undefined) out[header.name] = value;
  }
  return out;
}
