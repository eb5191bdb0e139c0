// RFC 7591 dynamic client registration at /register. Ids are the server's own
// (≥128 bits), whatever the client sent; a secret is returned once and kept
// only as a hash; the body, the redirect URIs and the rate per IP are bounded,
// and an unused registration expires. Nothing is written for a refused request.
import { Hono } from 'hono';
import { AS_ENDPOINTS } from '../../config/reserved-paths.js';
import { GatewayError } from '../../errors/gateway-error.js';
import type { AsContext } from '../context.js';
import { publicCors } from '../helpers/cors.js';
import { clientIp } from '../helpers/client-ip.js';
import { ClientMetadataError, parseClientMetadata } from '../clients/client-metadata.js';
import type { ClientRecord } from '../clients/client-record.js';
import type { ClientRegistry } from '../clients/client-registry.js';
import { NO_STORE } from '../helpers/no-store.js';
import type { RateLimiter } from '../helpers/rate-limit.js';
import { readBoundedText } from '../helpers/request-body.js';
import { hashSecret, randomToken } from '../helpers/secrets.js';

const MAX_REGISTRATION_BYTES = 64 * 1024;

/** Keys that mean prototype tricks in a JSON body: refused outright rather than carried along. */
const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

export interface RegisterDeps {
  clients: ClientRegistry;
  rateLimiter: RateLimiter;
}

export function registerRoutes(ctx: AsContext, deps: RegisterDeps): Hono {
  const app = new Hono();
  app.use(AS_ENDPOINTS.register, publicCors);
  app.post(AS_ENDPOINTS.register, async (c) => {
    const ip = clientIp(c, ctx.trustProxy);
    await deps.rateLimiter.check(ip);
    const metadata = parseBody(await readBoundedText(c.req.raw, MAX_REGISTRATION_BYTES), c.req.header('content-type'));

    const issuedAt = Math.floor(Date.now() / 1000);
    const clientId = randomToken(18);
    const secret = metadata.tokenEndpointAuthMethod === 'none' ? undefined : randomToken(32);
    const client: ClientRecord = {
      clientId,
      kind: 'dynamic',
      redirectUris: metadata.redirectUris,
      grantTypes: metadata.grantTypes,
      tokenEndpointAuthMethod: metadata.tokenEndpointAuthMethod,
      applicationType: metadata.applicationType,
      ...(secret && { secretHash: hashSecret(secret) }),
      clientName: metadata.text.client_name,
      clientUri: metadata.text.client_uri,
      logoUri: metadata.text.logo_uri,
      scope: metadata.scope,
      issuedAt,
    };
    await deps.rateLimiter.record(ip);
    await deps.clients.register(client);
    ctx.audit.record({ event: 'client_registered', client_id: clientId, kind: 'dynamic', auth_method: client.tokenEndpointAuthMethod, redirect_hosts: client.redirectUris.map(hostOf) });

    return c.json(
      {
        client_id: clientId,
        client_id_issued_at: issuedAt,
        ...(secret && { client_secret: secret, client_secret_expires_at: 0 }),
        redirect_uris: client.redirectUris,
        grant_types: client.grantTypes,
        response_types: metadata.responseTypes,
        token_endpoint_auth_method: client.tokenEndpointAuthMethod,
        application_type: client.applicationType,
        ...(metadata.scope && { scope: metadata.scope }),
        ...metadata.text,
      },
      201,
      NO_STORE,
    );
  });
  return app;
}

function parseBody(text: string, contentType: string | undefined) {
  if (contentType?.split(';')[0]?.trim().toLowerCase() !== 'application/json') {
    throw new GatewayError(400, 'invalid_client_metadata', 'The registration request must be application/json');
  }
  let body: unknown;
  try {
    body = JSON.parse(text, (key, value: unknown) => {
      if (FORBIDDEN_KEYS.has(key)) throw new ClientMetadataError('invalid_client_metadata', `the key ${key} is not allowed`);
      return value;
    });
  } catch (err) {
    if (err instanceof ClientMetadataError) throw new GatewayError(400, err.code, err.message);
    throw new GatewayError(400, 'invalid_client_metadata', 'The registration request is not valid JSON');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new GatewayError(400, 'invalid_client_metadata', 'The registration request must be a JSON object');
  }
  try {
    // client_id and client_secret in the request are ignored: the server issues its own.
    return parseClientMetadata(body as Record<string, unknown>, { defaultAuthMethod: 'client_secret_basic' });
  } catch (err) {
    if (err instanceof ClientMetadataError) throw new GatewayError(400, err.code, err.message);
    throw err;
  }
}

function hostOf(uri: string): string {
  try {
    return new URL(uri).host || new URL(uri).protocol;
  } catch {
    return '';
  }
}
