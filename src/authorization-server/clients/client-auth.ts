// Client authentication at /token and /revoke (RFC 6749 §2.3, OAuth 2.1
// §2.4): `none` (public clients name themselves with client_id),
// `client_secret_basic` or `client_secret_post` (secrets compared as hashes,
// in constant time). One method per request; a failure is 401 invalid_client,
// with a Basic challenge.
import { GatewayError } from '../../errors/gateway-error.js';
import { basicChallenge } from '../../errors/respond.js';
import { isConfidential, type ClientRecord } from './client-record.js';
import type { ClientRegistry } from './client-registry.js';
import type { Params } from '../helpers/request-body.js';
import { secretMatches } from '../helpers/secrets.js';

interface PresentedCredentials {
  clientId: string;
  secret?: string;
}

export async function authenticateClient(clients: ClientRegistry, params: Params, authorization: string | undefined, realm: string): Promise<ClientRecord> {
  const presented = credentials(params, authorization, realm);
  const lookup = await clients.find(presented.clientId);
  if (!lookup.found) throw invalidClient('Client authentication failed', realm);
  const { client } = lookup;
  if (isConfidential(client)) {
    if (presented.secret === undefined || !client.secretHash || !secretMatches(presented.secret, client.secretHash)) {
      throw invalidClient('Client authentication failed', realm);
    }
  } else if (presented.secret !== undefined) {
    // A public client has no secret: one that sends one is not who it says.
    throw invalidClient('Client authentication failed', realm);
  }
  return client;
}

function credentials(params: Params, authorization: string | undefined, realm: string): PresentedCredentials {
  const bodyId = params.get('client_id');
  const bodySecret = params.get('client_secret');
  const basic = authorization === undefined ? undefined : parseBasic(authorization, realm);
  if (basic) {
    if (bodySecret !== undefined) throw new GatewayError(400, 'invalid_request', 'Use one client authentication method');
    if (bodyId !== undefined && bodyId !== basic.clientId) throw new GatewayError(400, 'invalid_request', 'client_id does not match the authenticated client');
    return basic;
  }
  if (!bodyId) throw invalidClient('Client authentication is required', realm);
  return bodySecret === undefined ? { clientId: bodyId } : { clientId: bodyId, secret: bodySecret };
}

/** RFC 6749 §2.3.1: base64(urlencoded(id) ":" urlencoded(secret)). */
function parseBasic(header: string, realm: string): PresentedCredentials | undefined {
  const match = /^basic +([A-Za-z0-9+/]+=*) *$/i.exec(header);
  if (!match) {
    if (/^basic\b/i.test(header)) throw invalidClient('Malformed Basic credentials', realm);
    throw invalidClient('Unsupported client authentication scheme', realm);
  }
  const decoded = Buffer.from(match[1] as string, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) throw invalidClient('Malformed Basic credentials', realm);
  try {
    const clientId = formDecode(decoded.slice(0, colon));
    const secret = formDecode(decoded.slice(colon + 1));
    if (!clientId) throw new Error('empty client id');
    // `id:` (no secret) is how some public clients use Basic.
    return secret === '' ? { clientId } : { clientId, secret };
  } catch {
    throw invalidClient('Malformed Basic credentials', realm);
  }
}

const formDecode = (value: string) => decodeURIComponent(value.replace(/\+/g, ' '));

function invalidClient(description: string, realm: string): GatewayError {
  return new GatewayError(401, 'invalid_client', description, { headers: basicChallenge(realm) });
}
