/**
 * An https server on loopback with a throwaway self-signed certificate, for
 * what the built-in AS fetches (client ID metadata documents, redirects):
 * each test sets the handler of a path, and reads which targets were asked for.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { selfSignedCertificate } from './authorization-server.js';

export type DocumentHandler = (req: IncomingMessage, res: ServerResponse) => void;

export interface DocumentServer {
  /** https://127.0.0.1:port */
  origin: string;
  /** The self-signed certificate: the CA a fetcher must trust to reach this server. */
  cert: string;
  /** Every request target asked for, in order. */
  hits: string[];
  /** The handler of each path (the query is ignored); any other path is 404. */
  routes: Map<string, DocumentHandler>;
  close(): Promise<void>;
}

export async function startDocumentServer(): Promise<DocumentServer> {
  const tls = await selfSignedCertificate();
  const hits: string[] = [];
  const routes = new Map<string, DocumentHandler>();
  const server = createServer({ key: tls.key, cert: tls.cert }, (req, res) => {
    hits.push(req.url ?? '');
    const handler = routes.get((req.url ?? '').split('?')[0]!);
    if (handler) handler(req, res);
    else res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    origin: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    cert: tls.cert,
    hits,
    routes,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
