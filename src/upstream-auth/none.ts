// `none`: the client's token is removed and nothing takes its place.
import type { UpstreamCredential } from './upstream-credential.js';

const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

export function noneCredential(): UpstreamCredential {
  return { headersFor: () => NO_HEADERS };
}
