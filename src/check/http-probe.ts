// One bounded HTTP request of `check --online`, answered as facts to describe
// (status, location, JSON body) or a failure phrased for an operator. Like the
// gateway's own requests, it follows no redirect (one is reported instead), and
// it uses undici's request, as the forwarder does: fetch would refuse ports
// that the forwarder reaches (WHATWG's "bad ports").
import { request } from 'undici';
import { redactUrl } from '../config/urls.js';

/** Per request: an IdP or upstream slower than this will also fail the gateway's first clients. */
export const PROBE_TIMEOUT_MS = 5_000;
/** Metadata and key sets are small; this only bounds a wrong URL that serves a large file. */
const MAX_BODY_BYTES = 1024 * 1024;

export interface ProbeInit {
  method?: 'GET' | 'POST' | 'DELETE';
  headers?: Record<string, string>;
  body?: string;
}

export interface ProbeAnswer {
  status: number;
  headers: Headers;
  /** The body read as JSON; undefined when it is not JSON (or not read). */
  json?: unknown;
}

/** Resolves with the answer, or rejects with an Error whose message names what went wrong, without credentials. */
export async function probe(url: string, init: ProbeInit = {}, readBody = true): Promise<ProbeAnswer> {
  const signal = AbortSignal.timeout(PROBE_TIMEOUT_MS);
  let response: Awaited<ReturnType<typeof request>>;
  try {
    response = await request(url, { method: init.method ?? 'GET', headers: { accept: 'application/json', ...init.headers }, body: init.body, signal });
  } catch (err) {
    throw new Error(describeFailure(signal.aborted ? signal.reason : err));
  }
  const headers = new Headers();
  for (const [name, value] of Object.entries(response.headers)) if (typeof value === 'string') headers.set(name, value);
  const answer: ProbeAnswer = { status: response.statusCode, headers };
  const isJson = /json/i.test(headers.get('content-type') ?? '');
  if (readBody && isJson && answer.status < 300) answer.json = await readJson(response.body).catch(() => undefined);
  // dump() reads and discards a little; destroy() would emit an error nobody listens to.
  else await response.body.dump().catch(() => undefined);
  return answer;
}

/** `HTTP 404`, or for a redirect where it leads (the gateway will not follow it). */
export function describeStatus(answer: ProbeAnswer): string {
  const location = answer.headers.get('location');
  if (answer.status >= 300 && answer.status < 400 && location) return `HTTP ${answer.status}, a redirect to ${redactUrl(location)} (not followed)`;
  return `HTTP ${answer.status}`;
}

/** ECONNREFUSED, ENOTFOUND, a timeout: what an operator can act on, never a URL with its credentials. */
export function describeFailure(err: unknown): string {
  if (err instanceof Error && err.name === 'TimeoutError') return `no answer within ${PROBE_TIMEOUT_MS / 1000}s`;
  const cause = err instanceof Error ? ((err.cause ?? err) as { code?: unknown; message?: unknown }) : undefined;
  if (typeof cause?.code === 'string') return `unreachable (${cause.code})`;
  const message = typeof cause?.message === 'string' ? cause.message : err instanceof Error ? err.message : String(err);
  // undici names the URL in some messages (one with credentials, for instance).
  return `unreachable (${message.replace(/\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>]+/gi, (url) => redactUrl(url))})`;
}

async function readJson(body: AsyncIterable<Uint8Array>): Promise<unknown> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.byteLength;
    // Leaving the loop ends the stream.
    if (size > MAX_BODY_BYTES) throw new Error('too large');
    chunks.push(chunk);
  }
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}
