// `check --online` for an introspection endpoint: it must accept the
// gateway's client credentials and answer an unknown token as inactive.
import * as oauth from 'oauth4webapi';
import type { IntrospectionTokenConfig } from '../config/types.js';
import { redactUrl } from '../config/urls.js';
import { error, ok, type Finding } from './findings.js';
import { describeFailure, PROBE_TIMEOUT_MS } from './http-probe.js';

/** Random enough that no server knows it; an active answer would mean the endpoint answers yes to anything. */
const PROBE_TOKEN = `mcp-auth-gateway-check-${crypto.randomUUID()}`;

export async function probeIntrospection(config: IntrospectionTokenConfig): Promise<Finding> {
  const endpoint = new URL(config.endpoint);
  const subject = 'introspection';
  const where = redactUrl(endpoint.href);
  // The same client and request as the gateway's verifier (auth/introspection-verifier.ts).
  const as: oauth.AuthorizationServer = { issuer: config.issuer ?? endpoint.origin, introspection_endpoint: endpoint.href };
  const client: oauth.Client = { client_id: config.clientId };
  try {
    const response = await oauth.introspectionRequest(as, client, oauth.ClientSecretBasic(config.clientSecret), PROBE_TOKEN, {
      signal: AbortSignal.timeout(PROBE_TIMEOUT_MS),
      additionalParameters: { token_type_hint: 'access_token' },
      [oauth.allowInsecureRequests]: endpoint.protocol === 'http:',
    });
    const result = await oauth.processIntrospectionResponse(as, client, response);
    if (result.active === true) return error(subject, `${where} calls an unknown token active: it would let any token through`);
    return ok(subject, `${where} accepts client ${config.clientId} and calls an unknown token inactive`);
  } catch (err) {
    if (err instanceof oauth.ResponseBodyError) return error(subject, `${where} answered HTTP ${err.status} ${err.error}: ${err.status === 401 || err.error === 'invalid_client' ? 'the client credentials are refused' : 'the request is refused'}`);
    if (err instanceof oauth.OperationProcessingError) {
      const status = err.cause instanceof Response ? ` (HTTP ${err.cause.status})` : '';
      return error(subject, `${where}: not an introspection answer${status}`);
    }
    return error(subject, `${where}: ${describeFailure(err)}`);
  }
}
