// The gateway judges a body's bytes as UTF-8 JSON (RFC 8259 §8.1), and the
// upstream must read those same bytes the same way. A body that declares
// another charset could be decoded by the upstream (a Java or .NET server
// honouring `charset=`, or `charset*=` per RFC 2231 / RFC 8187) into other
// names than the ones the policy judged; a body with a content coding
// (RFC 9110 §8.4) is decoded by the upstream into bytes the gateway never
// read. Both are refused, like every other body with two readings.
import { GatewayError } from '../errors/gateway-error.js';

/** `charset` parameter values that name UTF-8 (case-insensitive, optionally quoted). */
const UTF8_LABELS = new Set(['utf-8', 'utf8']);

/** RFC 8187 ext-value: `charset'language'pct-encoded-value`. */
const EXTENDED_VALUE = /^([^']*)'[^']*'(.*)$/;

const notUtf8 = () => new GatewayError(400, 'invalid_request', 'The body must be UTF-8: the Content-Type declares another charset');

/** The charset a `charset*=` parameter names, lower case; undefined when malformed. */
function extendedCharset(value: string): string | undefined {
  const parts = EXTENDED_VALUE.exec(value);
  if (!parts) return undefined;
  try {
    return decodeURIComponent(parts[2]!).toLowerCase();
  } catch {
    return undefined;
  }
}

/** Throws 400 when `Content-Type` declares a charset other than UTF-8, or declares one twice. */
export function requireUtf8Body(contentType: string | undefined): void {
  if (contentType === undefined || !contentType.includes('=')) return;
  let charsets = 0;
  for (const parameter of contentType.split(';').slice(1)) {
    const eq = parameter.indexOf('=');
    if (eq < 0) continue;
    const name = parameter.slice(0, eq).trim().toLowerCase();
    if (!name.startsWith('charset')) continue;
    const raw = parameter.slice(eq + 1).trim();
    let charset: string | undefined;
    if (name === 'charset') charset = raw.replace(/^"(.*)"$/, '$1').toLowerCase();
    else if (name === 'charset*') charset = extendedCharset(raw);
    // Any other `charset…` name (RFC 2231 continuations `charset*0=`, say) is
    // a declaration some reader may reassemble: refused.
    else if (name.startsWith('charset*')) charset = undefined;
    else continue;
    if (++charsets > 1 || charset === undefined || !UTF8_LABELS.has(charset)) throw notUtf8();
  }
}

/** Throws 400 when `Content-Encoding` names any coding but `identity`. */
export function requireIdentityEncoding(contentEncoding: string | undefined): void {
  if (contentEncoding === undefined || contentEncoding.trim().toLowerCase() === 'identity') return;
  throw new GatewayError(400, 'invalid_request', 'The body must not be content-encoded: the gateway judges the bytes the upstream reads');
}
