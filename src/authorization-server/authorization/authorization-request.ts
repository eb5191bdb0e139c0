// Validates an /authorize request in the order that keeps it safe: first the
// client and its redirect URI — on failure an error page, never a redirect
// (an unverified redirect_uri would make the AS an open redirector) — then
// everything else. Those later errors go back to the redirect URI only for a
// client the operator configured; a dynamic client's redirect URI is whatever
// anyone registered, so before the user has seen the consent page naming it,
// its errors are an error page too (RFC 9700 §4.11.2).
import type { AsContext } from '../context.js';
import type { ClientRecord } from '../clients/client-record.js';
import type { ClientRegistry } from '../clients/client-registry.js';
import type { AuthorizationRequest } from '../interactions/interactions.js';
import { isWellFormedChallenge } from '../tokens/pkce.js';
import { matchRedirectUri } from '../../config/redirect-uri.js';
import { resolveResource, resolveScopes } from '../clients/resource-scope.js';

/** RFC 7638 with SHA-256, base64url without padding: 43 characters. */
const JWK_SHA256_THUMBPRINT = /^[A-Za-z0-9_-]{43}$/;

export type ValidatedRequest =
  /** forceConsent: `prompt=consent` — ask even if this browser already approved. */
  | { outcome: 'ok'; client: ClientRecord; request: AuthorizationRequest; forceConsent: boolean }
  /** Shown to the user as a page: nothing is redirected, nothing stored. */
  | { outcome: 'page'; title: string; message: string }
  /** Sent back to the (verified) redirect URI of a client the operator configured. */
  | { outcome: 'redirect'; redirectUri: string; state: string | undefined; error: string; description: string };

export async function validateAuthorizationRequest(ctx: AsContext, clients: ClientRegistry, search: URLSearchParams): Promise<ValidatedRequest> {
  const values = new Map<string, string[]>();
  for (const [name, value] of search) values.set(name, [...(values.get(name) ?? []), value]);
  const first = (name: string) => values.get(name)?.[0];
  const repeated = (name: string) => (values.get(name)?.length ?? 0) > 1;

  const verified = await verifyClientAndRedirectUri(clients, first, repeated);
  if ('outcome' in verified) return verified;
  const { clientId, client, sentRedirectUri, redirectUri, registeredRedirectUri } = verified;

  const state = repeated('state') ? undefined : first('state');
  const fail = (error: string, description: string): ValidatedRequest =>
    client.kind === 'static'
      ? { outcome: 'redirect', redirectUri, state, error, description }
      : page('Invalid request', `The application sent an authorization request that cannot be processed: ${description} (${error}).`);

  // Several resources (RFC 8707 allows them) would need a token per audience: one MCP server per authorization here.
  if (repeated('resource')) return fail('invalid_target', 'exactly one resource is accepted');
  for (const list of values.values()) if (list.length > 1) return fail('invalid_request', 'a parameter is repeated');
  if (values.has('request') || values.has('request_uri')) return fail('request_not_supported', 'request objects are not supported');
  const responseType = first('response_type');
  if (!responseType) return fail('invalid_request', 'response_type is required');
  if (responseType !== 'code') return fail('unsupported_response_type', 'only response_type=code is supported');
  if (!client.grantTypes.includes('authorization_code')) return fail('unauthorized_client', 'this client is not registered for the authorization_code grant');
  const codeChallenge = first('code_challenge');
  if (!codeChallenge || !isWellFormedChallenge(codeChallenge)) return fail('invalid_request', 'a PKCE code_challenge (43 to 128 characters) is required');
  if (first('code_challenge_method') !== 'S256') return fail('invalid_request', 'code_challenge_method must be S256');
  if (first('response_mode') !== undefined && first('response_mode') !== 'query') return fail('invalid_request', 'only response_mode=query is supported');
  // Every authorization needs the user here (consent, login): a silent one cannot succeed.
  if (first('prompt')?.split(' ').includes('none')) return fail('login_required', 'user interaction is required');
  const dpopJkt = first('dpop_jkt');
  if (dpopJkt !== undefined && !JWK_SHA256_THUMBPRINT.test(dpopJkt)) return fail('invalid_request', 'dpop_jkt must be the base64url SHA-256 thumbprint of a JWK (RFC 9449 §10)');

  const resource = resolveResource(ctx, first('resource'));
  if (!resource.ok) return fail(resource.error, resource.description);
  const scopes = resolveScopes(resource.value, client, first('scope'));
  if (!scopes.ok) return fail(scopes.error, scopes.description);

  return {
    outcome: 'ok',
    client,
    forceConsent: first('prompt')?.split(' ').includes('consent') ?? false,
    request: {
      clientId,
      redirectUri,
      registeredRedirectUri,
      redirectUriSent: sentRedirectUri !== undefined,
      ...(state !== undefined && { state }),
      codeChallenge,
      ...(dpopJkt !== undefined && { dpopJkt }),
      resource: resource.value.resource,
      scopes: scopes.value,
    },
  };
}

const page = (title: string, message: string): ValidatedRequest => ({ outcome: 'page', title, message });

interface VerifiedClient {
  clientId: string;
  client: ClientRecord;
  sentRedirectUri: string | undefined;
  /** Where the response goes: as sent, or the one registered when none was sent. */
  redirectUri: string;
  /** The registered URI it matched (a native client's loopback port may differ). */
  registeredRedirectUri: string;
}

/** The first checks, whose failures are a page (never a redirect): the client is known, and the redirect URI is one of its own. */
async function verifyClientAndRedirectUri(
  clients: ClientRegistry,
  first: (name: string) => string | undefined,
  repeated: (name: string) => boolean,
): Promise<VerifiedClient | ValidatedRequest> {
  const clientId = first('client_id');
  if (!clientId || repeated('client_id')) return page('Invalid request', 'The request names no client, or more than one.');
  const lookup = await clients.find(clientId);
  if (!lookup.found) return page('Unknown application', `The application that sent you here is not known to this server (${lookup.reason}).`);
  const { client } = lookup;

  if (repeated('redirect_uri')) return page('Invalid request', 'The request names more than one redirect URI.');
  const sentRedirectUri = first('redirect_uri');
  if (sentRedirectUri === undefined) {
    // OAuth 2.1 §4.1.1: optional only when exactly one is registered.
    if (client.redirectUris.length !== 1) return page('Invalid request', 'The request has no redirect_uri.');
    const only = client.redirectUris[0] as string;
    return { clientId, client, sentRedirectUri, redirectUri: only, registeredRedirectUri: only };
  }
  const matched = matchRedirectUri(sentRedirectUri, client.redirectUris);
  if (!matched) return page('Invalid redirect URI', 'The address this request wants to send you back to is not registered for the application.');
  return { clientId, client, sentRedirectUri, redirectUri: sentRedirectUri, registeredRedirectUri: matched };
}
