/**
 * Real URI readers of three ecosystems, and what each resolves a resource URI
 * to: Node's WHATWG URL (with fileURLToPath for file:), Python's urllib.parse +
 * unquote + posixpath.normpath, Go's net/url + path.Clean (the last two as
 * long-running processes from test/security/fixtures/uri-readers/). A
 * `resource` is `scheme://host[:port]` + the decoded, normalised path: what
 * a server built on that reader would open or look up (the query is left out;
 * file://localhost counts as local, as file servers treat it).
 */
import { posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startReaders, type ReaderPair, type ReaderProcess } from './reader-processes.js';

const FIXTURES = new URL('../security/fixtures/uri-readers/', import.meta.url);

export interface UriReading {
  ok: boolean;
  /** The URI as the reader writes it back (WHATWG href, Python geturl(), Go String()). */
  serialized?: string;
  /** The decoded path before and after normalisation (Python, Go). */
  path?: string;
  normalized?: string;
  resource?: string;
}

export type UriReader = ReaderProcess<string, UriReading>;

/** RFC 3986 Appendix B. */
const RFC3986 = /^(?:([^:/?#]+):)?(?:\/\/([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?$/;

/** What the policy judged, as a resource: the raw string's scheme, authority and percent-decoded path, nothing resolved. */
export function judgedResource(uri: string): string {
  const [, scheme, authority, path] = RFC3986.exec(uri)!;
  return `${scheme}://${authority ?? ''}${decodeURIComponent(path!)}`;
}

/** Node: WHATWG URL (as the TypeScript MCP SDK parses resource URIs) and fileURLToPath. */
export function nodeReading(uri: string): UriReading {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return { ok: false };
  }
  if (url.protocol === 'file:') {
    try {
      const path = fileURLToPath(url);
      return { ok: true, serialized: url.href, path, normalized: posix.normalize(path), resource: `file://${posix.normalize(path)}` };
    } catch {
      return { ok: false, serialized: url.href };
    }
  }
  let path: string;
  try {
    path = decodeURIComponent(url.pathname);
  } catch {
    return { ok: false, serialized: url.href };
  }
  const normalized = path === '' ? path : posix.normalize(path);
  return { ok: true, serialized: url.href, path, normalized, resource: `${url.protocol}//${url.host}${normalized}` };
}

/** Python's urllib and, when `go` is on PATH, Go's net/url; each is sent one JSON string (a URI) per line. */
export function startUriReaders(): Promise<ReaderPair<string, UriReading>> {
  return startReaders(FIXTURES, (uri: string) => JSON.stringify(uri), { name: 'python urllib', decode: readingFrom('geturl', 'normalized') }, { name: 'go net/url', decode: readingFrom('string', 'cleaned') });
}

/** A reader's answer as a UriReading; each reader names the written-back URI and the normalised path its own way. */
function readingFrom(serialized: string, normalized: string) {
  return (raw: Record<string, unknown>): UriReading =>
    raw.ok ? { ok: true, serialized: raw[serialized] as string, path: raw.path as string, normalized: raw[normalized] as string, resource: raw.resource as string } : { ok: false };
}
