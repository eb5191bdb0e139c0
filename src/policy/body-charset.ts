// The gateway reads every body it judges as UTF-8 (RFC 8259 §8.1). A body
// that declares another charset could be decoded by the upstream (a Java or
// .NET server honouring `charset=`) into other names than the ones the policy
// judged: refused, like every other body with two readings.
import { GatewayError } from '../errors/gateway-error.js';

/** `charset` parameter values that name UTF-8 (case-insensitive, optionally quoted). */
const UTF8_LABELS = new Set(['utf-8', 'utf8']);

/** Throws 400 when `Content-Type` declares a charset other than UTF-8, or declares one twice. */
export function requireUtf8Body(contentType: string | undefined): void {
  if (contentType === undefined || !contentType.includes('=')) return;
  let charsets = 0;
  for (const parameter of contentType.split(';').slice(1)) {
    const eq = parameter.indexOf('=');
    if (eq < 0 || parameter.slice(0, eq).trim().toLowerCase() !== 'charset') continue;
    const value = parameter
      .slice(eq + 1)
      .trim()
      .replace(/^"(.*)"$/, '$1')
      .toLowerCase();
    if (++charsets > 1 || !UTF8_LABELS.has(value)) {
      throw new GatewayError(400, 'invalid_request', 'The body must be UTF-8: the Content-Type declares another charset');
    }
  }
}
