// Bounded request bodies for the AS endpoints: a size limit before and while
// reading, and form parameters that may appear only once (RFC 6749 §3.1, §3.2).
import { GatewayError } from '../../errors/gateway-error.js';

const MAX_FORM_BYTES = 64 * 1024;

export async function readBoundedText(request: Pick<Request, 'headers' | 'body'>, maxBytes: number): Promise<string> {
  const declared = Number(request.headers.get('content-length') ?? 0);
  if (declared > maxBytes) throw tooLarge(maxBytes);
  if (!request.body) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of request.body) {
    size += chunk.byteLength;
    if (size > maxBytes) throw tooLarge(maxBytes);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** A browser's form post (POST /authorize, consent, login pages): size-bounded, of any content type; each page judges its own fields. */
export async function readPageForm(request: Request): Promise<URLSearchParams> {
  return new URLSearchParams(await readBoundedText(request, MAX_FORM_BYTES));
}

/** Parameters of a form or query; a repeated parameter is refused. */
export type Params = ReadonlyMap<string, string>;

function singleParams(search: URLSearchParams): Params {
  const params = new Map<string, string>();
  for (const [name, value] of search) {
    if (params.has(name)) throw new GatewayError(400, 'invalid_request', 'A parameter is repeated');
    params.set(name, value);
  }
  return params;
}

/** The value of a parameter the request cannot do without: 400 invalid_request when it is missing or empty. */
export function requiredParam(params: Params, name: string): string {
  const value = params.get(name);
  if (!value) throw new GatewayError(400, 'invalid_request', `${name} is required`);
  return value;
}

/** An `application/x-www-form-urlencoded` body (the only encoding /token and /revoke accept). */
export async function readForm(request: Request, maxBytes = MAX_FORM_BYTES): Promise<Params> {
  const type = request.headers.get('content-type')?.split(';')[0]?.trim().toLowerCase();
  if (type !== 'application/x-www-form-urlencoded') {
    throw new GatewayError(400, 'invalid_request', 'The body must be application/x-www-form-urlencoded');
  }
  return singleParams(new URLSearchParams(await readBoundedText(request, maxBytes)));
}

function tooLarge(maxBytes: number): GatewayError {
  return new GatewayError(413, 'payload_too_large', `The body is limited to ${maxBytes} bytes`);
}
