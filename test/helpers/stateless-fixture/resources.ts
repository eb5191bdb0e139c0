// The fixture's resources (server/resources of 2026-07-28): a few fixed text
// resources, a binary one, one template (content.ts), reads with the SEP-2549 caching hints, and an
// unknown URI refused with -32602 and the URI in `data` (SEP-2164). The
// `file:///public/…` and `file:///secret/…` pair lets tests aim policy rules
// at resource URIs.
import { BINARY_RESOURCE, contentResource, DATA_TEMPLATE } from './content.js';
import { complete, RpcError, type Json } from './rpc.js';

const TEXT: Record<string, string> = {
  'test://static-text': 'This is the content of the static text resource.',
  'file:///public/readme.txt': 'public readme',
  'file:///secret/key.txt': 'secret key',
};
const RESOURCES: readonly Json[] = [
  ...Object.keys(TEXT).map((uri) => ({ uri, name: uri.slice(uri.lastIndexOf('/') + 1), description: `The text at ${uri}`, mimeType: 'text/plain' })),
  BINARY_RESOURCE,
];

const contentsOf = (uri: string): Json[] | undefined => {
  const text = TEXT[uri];
  return text === undefined ? contentResource(uri) : [{ uri, mimeType: 'text/plain', text }];
};

/** Answers a resources method, or undefined when `method` is not one. */
export function resourcesAnswer(method: string, params: Json): Json | undefined {
  switch (method) {
    case 'resources/list':
      return complete({ resources: RESOURCES }, true);
    case 'resources/templates/list':
      return complete({ resourceTemplates: [DATA_TEMPLATE] }, true);
    case 'resources/read': {
      const uri = String(params.uri);
      const contents = contentsOf(uri);
      if (contents === undefined) throw new RpcError(400, -32602, `Resource not found: ${uri}`, { uri });
      return complete({ contents }, true);
    }
    default:
      return undefined;
  }
}
