// `static`: one secret per upstream. The config loader has lower-cased the
// header and added `Bearer ` where the value had no scheme. This runs on
// every request, so the headers object is built and frozen once.
import type { UpstreamCredential } from './upstream-credential.js';

const TOKEN = /^[!#$%&'*+.^_`|~0-9a-z-]+$/;
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

export function staticCredential(config: { header: string; value: string }): UpstreamCredential {
  const header = config.header.toLowerCase();
  if (!TOKEN.test(header)) throw new Error(`upstream_auth.header is not a valid header name: ${JSON.stringify(config.header)}`);
  // CR/LF or NUL in a value would split or corrupt the upstream request.
  if (!config.value || !FIELD_VALUE.test(config.value)) throw new Error('upstream_auth.value is empty or holds control characters');
  const headers: Readonly<Record<string, string>> = Object.freeze({ [header]: config.value });
  return { headersFor: () => headers };
}
