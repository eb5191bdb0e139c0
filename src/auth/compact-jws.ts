// Reading a compact JWS (RFC 7515 §7.1) one way only: each segment strict
// base64url (RFC 7515 §2: no padding, only the URL-safe alphabet, and the
// canonical encoding, so no two strings name the same bytes), the header and
// payload UTF-8 and JSON read by the strict reader (no duplicate member names:
// `{"alg":"RS256","alg":"none"}` or two `aud` would mean different things to
// different readers). The signature is checked elsewhere (jws-signature.ts).
import { parseStrictJson } from '../policy/strict-json.js';

const BASE64URL = /^[A-Za-z0-9_-]*$/;
/** Headers and claims are small objects; deeper nesting is refused, not read. */
const MAX_JSON_DEPTH = 32;
/** fatal: invalid UTF-8 is refused; ignoreBOM: a BOM is kept, so the strict reader refuses it. */
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The three segments of a compact JWS, as sent. */
export interface JwsSegments {
  header: string;
  payload: string;
  signature: string;
}

/** The segments, or undefined when the text is not three dot-separated parts. */
export function splitCompactJws(token: string): JwsSegments | undefined {
  const first = token.indexOf('.');
  const second = token.indexOf('.', first + 1);
  if (first === -1 || second === -1 || token.indexOf('.', second + 1) !== -1) return undefined;
  return { header: token.slice(0, first), payload: token.slice(first + 1, second), signature: token.slice(second + 1) };
}

/** The bytes of a strict base64url segment, or undefined when it is not one. */
export function decodeBase64UrlStrict(segment: string): Buffer | undefined {
  // A length of 4n+1 cannot be base64; other lengths decode, and re-encoding shows a non-zero padding bit.
  if (segment.length % 4 === 1 || !BASE64URL.test(segment)) return undefined;
  const bytes = Buffer.from(segment, 'base64url');
  return bytes.toString('base64url') === segment ? bytes : undefined;
}

/** A segment's JSON object (a plain object), or undefined when it is not strict base64url, UTF-8, JSON and an object. */
export function decodeJsonSegment(segment: string): Record<string, unknown> | undefined {
  const bytes = decodeBase64UrlStrict(segment);
  if (bytes === undefined) return undefined;
  let value: unknown;
  try {
    value = parseStrictJson(utf8.decode(bytes), { maxDepth: MAX_JSON_DEPTH });
  } catch {
    return undefined;
  }
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}
