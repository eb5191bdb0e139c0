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

export interface DecisionAudit {
  /** The decisions of one body; `batchDenied`: one refused message refused them all. */
  decided(auth: AuthContext, messages: readonly MessageDecision[], batchDenied: boolean): void;
  /** A body refused before any decision (malformed, header mismatch). */
  rejected(auth: AuthContext, reason: string, status: number): void;
}

export function createDecisionAudit(audit: Audit, route: Pick<RouteConfig, 'path' | 'file'>): DecisionAudit {
  const ruleOf = (m: MessageDecision) => (m.rule ? (m.rule.source ?? `${route.file}: rules[${m.rule.index}]`) : 'route');

  function decided(auth: AuthContext, messages: readonly MessageDecision[], batchDenied: boolean): void {
    if (!audit.enabled) return;
    // The client's answers to server requests ask nothing of the server: no decision to record.
    const recorded = messages.filter((m) => m.reason !== 'response');
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
    });
  }

  function rejected(auth: AuthContext, reason: string, status: number): void {
    if (audit.enabled) audit.record({ event: 'decision', route: route.path, sub: auth.subject, client_id: auth.clientId, decision: 'deny', reason, status });
  }

  return { decided, rejected };
}
