// The policy step of a protected route, between reading the body and the
// credential swap: parse the JSON-RPC body once, hold the 2026-07-28 routing
// headers to it, decide, write the audit line, and — when the route filters
// `tools/list` — hand the proxy the response transform for this request.
import type { IncomingHttpHeaders } from 'node:http';
import type { AuthContext } from '../auth/principal.js';
import type { RouteConfig } from '../config/types.js';
import { deniedByPolicy, GatewayError, insufficientScope } from '../errors/gateway-error.js';
import type { Audit } from '../observability/audit.js';
import type { GatewaySpan } from '../observability/tracing.js';
import type { ResponseTransform } from '../proxy/response-transform.js';
import { createDecisionAudit } from './decision-audit.js';
import { spanDecision, spanRequest } from './decision-span.js';
import { evaluate, evaluateOperation, type Decision } from './evaluate.js';
import { requireIdentityEncoding, requireUtf8Body } from './body-charset.js';
import { parseJsonRpcBody, type ParsedRequest } from './json-rpc.js';
import { HeaderMismatchError, checkMcpHeaders, refuseMcpHeadersWithoutBody } from './mcp-headers.js';
import { compilePolicy, type RoutePolicy } from './route-policy.js';
import { toolsListFilter } from './tools-list-filter.js';

/** Upper bound of a tools/list answer (JSON body, or one event) held in memory to filter it. */
const MAX_FILTERED_BYTES = 16 * 1024 * 1024;

const DENIED_BY_POLICY = 'denied by policy: no scope allows this operation';

export interface PolicyRequest {
  method?: string;
  headers: IncomingHttpHeaders;
  /** Node's `[name, value, …]` list, where repeated headers are still apart. */
  rawHeaders?: readonly string[];
}

export interface PolicyOutcome {
  /** Set when the answer must be filtered (tools/list). */
  transform?: ResponseTransform;
}

export interface PolicyStep {
  readonly policy: RoutePolicy;
  /**
   * Throws a GatewayError (400 not JSON-RPC, 403 refused) or a
   * HeaderMismatchError (400, -32020); nothing is forwarded then. `span`:
   * the request's, told the MCP operation and the decision.
   */
  check(req: PolicyRequest, body: Buffer, auth: AuthContext, span?: GatewaySpan): PolicyOutcome;
}

export interface PolicyStepDeps {
  audit: Audit;
}

const NOTHING_TO_DO: PolicyOutcome = Object.freeze({});

export function createPolicyStep(route: RouteConfig, deps: PolicyStepDeps): PolicyStep {
  const policy = compilePolicy(route);
  const { audit } = deps;
  const decisionAudit = createDecisionAudit(audit, route);
  // No rules, no filtering and no audit line: every well-formed request that
  // passed authentication (the route's scopes) is allowed, so nothing is left
  // to decide once the body has been read and held to the routing headers.
  const onlyValidate = policy.rules.length === 0 && !route.filterToolsList && !audit.enabled;

  const mayCall = (auth: AuthContext) => (tool: string) => evaluateOperation(policy, { method: 'tools/call', name: tool }, auth).allow;

  function filterFor(auth: AuthContext): ResponseTransform {
    return toolsListFilter({ mayCall: mayCall(auth), maxBytes: MAX_FILTERED_BYTES });
  }

  return {
    policy,
    check(req, body, auth, span) {
      if (req.method !== 'POST') {
        try {
          refuseMcpHeadersWithoutBody(req.headers);
        } catch (err) {
          decisionAudit.rejected(auth, 'header_mismatch', 400);
          throw err;
        }
        // A GET stream carries no request of the client's, but a resumed POST
        // stream may deliver a tools/list answer on it.
        return req.method === 'GET' && route.filterToolsList ? { transform: filterFor(auth) } : NOTHING_TO_DO;
      }
      let request: ParsedRequest;
      try {
        requireUtf8Body(req.headers['content-type']);
        requireIdentityEncoding(req.headers['content-encoding']);
        request = parseJsonRpcBody(body);
        checkMcpHeaders(req.headers, request, req.rawHeaders);
      } catch (err) {
        decisionAudit.rejected(auth, err instanceof HeaderMismatchError ? 'header_mismatch' : 'malformed', 400);
        throw err;
      }
      if (span) spanRequest(span, request);
      if (onlyValidate) {
        if (span) spanDecision(span, undefined, route);
        return NOTHING_TO_DO;
      }
      const decision = evaluate(policy, request, auth);
      decisionAudit.decided(auth, decision.messages, !decision.allow);
      if (span) spanDecision(span, decision, route);
      if (!decision.allow) throw refusal(decision);
      if (!route.filterToolsList) return NOTHING_TO_DO;
      // Every answer is read, whatever this body asks: a server (or a bridge
      // routing answers by id) may deliver a tool list on any answer it holds.
      return { transform: filterFor(auth) };
    },
  };
}

/** 403 insufficient_scope with the scopes that would allow it; 403 denied by policy, with no challenge, when none would. */
function refusal(decision: Decision): GatewayError {
  if (decision.reason === 'scope') {
    return insufficientScope('The token does not grant the scopes this operation requires', decision.requiredScopes);
  }
  return deniedByPolicy(DENIED_BY_POLICY);
}
