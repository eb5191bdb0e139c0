// The audit lines of a route's policy decisions: one per message decided, and
// one for a body refused before any decision. A batch gets a line for each of
// its first MAX_AUDITED_MESSAGES messages and for every later one that names
// what it acts on (`tools/call`, `resources/read`, `prompts/get`) or was
// refused, up to MAX_AUDITED_LINES; one summary line counts the rest, and how
// many named calls are among them. So ten pings in front cannot hide a call,
// and a body's size never sets how much is logged.
import type { AuthContext } from '../auth/principal.js';
import type { RouteConfig } from '../config/types.js';
import type { Audit } from '../observability/audit.js';
import type { MessageDecision } from './evaluate.js';

/** Every message of a batch up to this many gets its own line, whatever it asks. */
export const MAX_AUDITED_MESSAGES = 10;
/** Lines per request, named calls and refusals beyond the first messages included; the summary line comes on top. */
export const MAX_AUDITED_LINES = 50;

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

/** The messages that get a line of their own, in order, and the rest for the summary. */
function ownLines(recorded: readonly MessageDecision[]): { own: MessageDecision[]; rest: MessageDecision[] } {
  if (recorded.length <= MAX_AUDITED_MESSAGES) return { own: recorded as MessageDecision[], rest: [] };
  const own = recorded.slice(0, MAX_AUDITED_MESSAGES);
  const rest: MessageDecision[] = [];
  for (const m of recorded.slice(MAX_AUDITED_MESSAGES)) {
    if (own.length < MAX_AUDITED_LINES && (namesWhat(m) || !m.allow)) own.push(m);
    else rest.push(m);
  }
  return { own, rest };
}

/** A message that names the tool, resource or prompt it acts on. */
const namesWhat = (m: MessageDecision) => m.operation?.name !== undefined;

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
    const { own, rest } = ownLines(recorded);
    for (const m of own) {
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
    if (rest.length === 0) return;
    const refused = rest.filter((m) => !m.allow);
    const calls = rest.filter(namesWhat).length;
    audit.record({
      event: 'decision',
      route: route.path,
      sub: auth.subject,
      client_id: auth.clientId,
      decision: batchDenied ? 'deny' : 'allow',
      reason: 'batch_rest',
      messages: rest.length,
      refused: refused.length,
      // Named calls past MAX_AUDITED_LINES: counted, never dropped without a word.
      ...(calls > 0 && { calls }),
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
