// The policy step of a protected route, between reading the body and the
// credential swap: parse the JSON-RPC body once, hold the 2026-07-28 routing
// headers to it, decide, write the audit line, and — when the route filters
// `tools/list` — hand the proxy the response transform for this request.
import type { IncomingHttpHeaders } from 'node:http';
import type { AuthContext } from '../auth/principal.js';
import type { RouteConfig } from '../config/types.js';
import { deniedByPolicy, GatewayError, insufficientScope } from '../errors/gateway-error.js';
import type { Audit } from '../observability/audit.js';
import type { ResponseTransform } from '../proxy/response-transform.js';
import { evaluate, evaluateOperation, type Decision, type MessageDecision } from './evaluate.js';
import { requireIdentityEncoding, requireUtf8Body } from './body-charset.js';
import { parseJsonRpcBody, type ParsedRequest } from './json-rpc.js';
import { HeaderMismatchError, checkMcpHeaders, refuseMcpHeadersWithoutBody } from './mcp-headers.js';
import { compilePolicy, type RoutePolicy } from './route-policy.js';
import { toolsListFilter } from './tools-list-filter.js';

/** Upper bound of a tools/list answer (JSON body, or one event) held in memory to filter it. */
const MAX_FILTERED_BYTES = 16 * 1024 * 1024;

/**
 * Audit lines written for one request: a batch beyond this many messages gets
 * one summary line for the rest, so a body's size never sets how much is logged.
 */
export const MAX_AUDITED_MESSAGES = 10;

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
   * HeaderMismatchError (400, -32020); nothing is forwarded then.
   */
  check(req: PolicyRequest, body: Buffer, auth: AuthContext): PolicyOutcome;
}

export interface PolicyStepDeps {
  audit: Audit;
}

const NOTHING_TO_DO: PolicyOutcome = Object.freeze({});

export function createPolicyStep(route: RouteConfig, deps: PolicyStepDeps): PolicyStep {
  const policy = compilePolicy(route);
  const { audit } = deps;
  // No rules, no filtering and no audit line: every well-formed request that
  // passed authentication (the route's scopes) is allowed, so nothing is left
  // to decide once the body has been read and held to the routing headers.
  const onlyValidate = policy.rules.length === 0 && !route.filterToolsList && !audit.enabled;

  function record(auth: AuthContext, messages: MessageDecision[], batchDenied: boolean): void {
    if (!audit.enabled) return;
    // The client's answers to server requests ask nothing of the server: no decision to record.
    const decided = messages.filter((m) => m.reason !== 'response');
    for (const m of decided.slice(0, MAX_AUDITED_MESSAGES)) {
      // In a refused batch nothing is forwarded: a message allowed on its own is refused with it.
      const allow = m.allow && !batchDenied;
      audit.record({
        event: 'decision',
        route: route.path,
        sub: auth.subject,
        client_id: auth.clientId,
        ...(m.operation && { method: m.operation.method }),
        ...(m.operation?.name !== undefined && { name: m.operation.name }),
        decision: allow ? 'allow' : 'deny',
        reason: m.allow && batchDenied ? 'batch' : m.reason,
        rule: ruleOf(m),
        ...(!allow && { status: 403 }),
      });
    }
    const rest = decided.slice(MAX_AUDITED_MESSAGES);
    if (rest.length === 0) return;
    const refused = rest.filter((m) => !m.allow);
    audit.record({
      event: 'decision',
      route: route.path,
      sub: auth.subject,
      client_id: auth.clientId,
      decision: batchDenied ? 'deny' : 'allow',
      reason: 'batch_rest',
      messages: rest.length,
      refused: refused.length,
      ...(refused[0] && { rule: ruleOf(refused[0]) }),
      ...(batchDenied && { status: 403 }),
    });
  }

  const ruleOf = (m: MessageDecision) => (m.rule ? (m.rule.source ?? `${route.file}: rules[${m.rule.index}]`) : 'route');

  function recordRejected(auth: AuthContext, reason: string, status: number): void {
    if (!audit.enabled) return;
    audit.record({ event: 'decision', route: route.path, sub: auth.subject, client_id: auth.clientId, decision: 'deny', reason, status });
  }

  const mayCall = (auth: AuthContext) => (tool: string) => evaluateOperation(policy, { method: 'tools/call', name: tool }, auth).allow;

  function filterFor(auth: AuthContext): ResponseTransform {
    return toolsListFilter({ mayCall: mayCall(auth), maxBytes: MAX_FILTERED_BYTES });
  }

  return {
    policy,
    check(req, body, auth) {
      if (req.method !== 'POST') {
        try {
          refuseMcpHeadersWithoutBody(req.headers);
        } catch (err) {
          recordRejected(auth, 'header_mismatch', 400);
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
        recordRejected(auth, err instanceof HeaderMismatchError ? 'header_mismatch' : 'malformed', 400);
        throw err;
      }
      if (onlyValidate) return NOTHING_TO_DO;
      const decision = evaluate(policy, request, auth);
      record(auth, decision.messages, !decision.allow);
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
