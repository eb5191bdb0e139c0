// The fixture's resources (server/resources of 2026-07-28): a few fixed text
// resources, one template, reads with the SEP-2549 caching hints, and an
// unknown URI refused with -32602 and the URI in `data` (SEP-2164). The
// `file:///public/…` and `file:///secret/…` pair lets tests aim policy rules
// at resource URIs.
import { complete, RpcError, type Json } from './rpc.js';

const RESOURCES: readonly Json[] = [
  { uri: 'test://static-text', name: 'static-text', mimeType: 'text/plain' },
  { uri: 'file:///public/readme.txt', name: 'readme', mimeType: 'text/plain' },
  { uri: 'file:///secret/key.txt', name: 'key', mimeType: 'text/plain' },
];
const TEMPLATE = { uriTemplate: 'test://template/{id}', name: 'template', mimeType: 'text/plain' };
const TEMPLATE_URI = /^test:\/\/template\/([^/]+)$/;

const contentsOf = (uri: string): string | undefined => {
  if (RESOURCES.some((r) => r.uri === uri)) return `contents of ${uri}`;
  const id = TEMPLATE_URI.exec(uri)?.[1];
  return id === undefined ? undefined : `template instance ${id}`;
};

/** Answers a resources method, or undefined when `method` is not one. */
export function resourcesAnswer(method: string, params: Json): Json | undefined {
  switch (method) {
    case 'resources/list':
      return complete({ resources: RESOURCES }, true);
    case 'resources/templates/list':
      return complete({ resourceTemplates: [TEMPLATE] }, true);
    case 'resources/read': {
      const uri = String(params.uri);
      const text = contentsOf(uri);
      if (text === undefined) throw new RpcError(400, -32602, `Resource not found: ${uri}`, { uri });
      return complete({ contents: [{ uri, mimeType: 'text/plain', text }] }, true);
    }
    default:
      return undefined;
  }
}
