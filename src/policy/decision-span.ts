// What the policy step tells a request's span: the MCP method and the tool,
// resource or prompt it names (OpenTelemetry's MCP semantic conventions), and
// the decision with the rule that made it. Never a params value besides that
// name: arguments stay out of traces.
import type { RouteConfig } from '../config/types.js';
import type { GatewaySpan } from '../observability/tracing.js';
import type { Decision, MessageDecision } from './evaluate.js';
import { NAME_KIND, operationOf, type ParsedRequest } from './json-rpc.js';

const NAME_ATTRIBUTE = { tool: 'gen_ai.tool.name', uri: 'mcp.resource.uri', prompt: 'gen_ai.prompt.name' } as const;

/** The operation of a single message; for a batch, its size (each message's operation is in the audit lines). */
export function spanRequest(span: GatewaySpan, request: ParsedRequest): void {
  if (request.batch) {
    span.set('mag.jsonrpc.batch_size', request.messages.length);
    return;
  }
  const operation = operationOf(request.messages[0]!);
  if (operation === undefined) return;
  span.set('mcp.method.name', operation.method);
  const kind = NAME_KIND[operation.method];
  if (kind !== undefined && operation.name !== undefined) span.set(NAME_ATTRIBUTE[kind], operation.name);
}

/** allow or deny, and the rule (`file:line`) that decided: the one refused message's, else the single message's. */
export function spanDecision(span: GatewaySpan, decision: Decision | undefined, route: Pick<RouteConfig, 'file'>): void {
  span.set('mag.policy.decision', decision === undefined || decision.allow ? 'allow' : 'deny');
  const deciding: MessageDecision | undefined = decision?.messages.find((m) => !m.allow) ?? (decision?.messages.length === 1 ? decision.messages[0] : undefined);
  if (deciding?.rule) span.set('mag.policy.rule', deciding.rule.source ?? `${route.file}: rules[${deciding.rule.index}]`);
}
