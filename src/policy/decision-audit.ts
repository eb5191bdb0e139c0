// The audit lines of a route's policy decisions: one per message decided (a
// batch's first MAX_AUDITED_MESSAGES, then one summary line for the rest), and
// one for a body refused before any decision.
import type { AuthContext } from '../auth/principal.js';
import type { RouteConfig } from '../config/types.js';
import type { Audit } from '../observability/audit.js';
import type { MessageDecision } from './evaluate.js';

/**
 * Audit lines written for one request: a batch beyond this many messages gets
 * one summary line for the rest, so a body's size never sets how much is logged.
 */
export const MAX_AUDITED_MESSAGES = 10;

/** A request the policy allowed and a rate limit refused: its messages are recorded as refused by that limit. */
export interface LimitRefusal {
  /** The limit's `file:line`. */
  limit: string;
}

export interface DecisionAudit {
  /**
   * The decisions of one body; `batchDenied`: one refused message refused
   * them all, or a rate limit refused the whole body (every line then names it).
   */
  decided(auth: AuthContext, messages: readonly MessageDecision[], refusal: boolean | LimitRefusal): void;
  /** A body refused before any decision (malformed, header mismatch), or a bodiless request refused by a rate limit (`limit`). */
  rejected(auth: AuthContext, reason: string, status: number, limit?: string): void;
}

export function createDecisionAudit(audit: Audit, route: Pick<RouteConfig, 'path' | 'file'>): DecisionAudit {
  const ruleOf = (m: MessageDecision) => (m.rule ? (m.rule.source ?? `${route.file}: rules[${m.rule.index}]`) : 'route');

  function decided(auth: AuthContext, messages: readonly MessageDecision[], refusal: boolean | LimitRefusal): void {
    if (!audit.enabled) return;
    const batchDenied = refusal !== false;
    // A rate limit refuses after the policy allowed: each line says so, with the limit, and 429.
    const limited = typeof refusal === 'object' ? { reason: 'rate_limited', limit: refusal.limit, status: 429 } : undefined;
    // The client's answers to server requests ask nothing of the server: no decision to record.
    const recorded = messages.filter((m) => m.reason !== 'response');
    // Responses only, yet refused by a limit: the refusal still gets its line.
    if (limited && recorded.length === 0) rejected(auth, limited.reason, limited.status, limited.limit);
    for (const m of recorded.slice(0, MAX_AUDITED_MESSAGES)) {
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
        ...limited,
      });
    }
    const rest = recorded.slice(MAX_AUDITED_MESSAGES);
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
      // The summary keeps its reason; the limit and status say why the rest was refused.
      ...(limited && { limit: limited.limit, status: 429 }),
    });
  }

  function rejected(auth: AuthContext, reason: string, status: number, limit?: string): void {
    if (!audit.enabled) return;
    audit.record({ event: 'decision', route: route.path, sub: auth.subject, client_id: auth.clientId, decision: 'deny', reason, ...(limit !== undefined && { limit }), status });
  }

  return { decided, rejected };
}
