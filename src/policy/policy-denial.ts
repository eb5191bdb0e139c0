// A request refused by a rule that no scope can lift (`deny`, `allow_clients`,
// `allow_subjects`): 403 without a challenge (insufficient_scope would send
// MCP clients into a step-up that cannot help), whose body is a JSON-RPC error
// for the request's id. MCP clients surface a JSON-RPC error body at a non-2xx
// status as the call's error, so the model reads "denied by policy"; an OAuth
// body became "Server returned an error response" or "tool not found"
// (DESIGN §8.4). A batch gets one error per denied member.
import { GatewayError } from '../errors/gateway-error.js';
import type { MessageDecision } from './evaluate.js';
import { idOf, subscribedUris, type JsonRpcId, type JsonRpcMessage, type Operation } from './json-rpc.js';

/** JSON-RPC error code of a request denied by policy (implementation-defined server error range). */
export const DENIED_BY_POLICY_CODE = -32003;

interface DeniedMember {
  id: JsonRpcId;
  message: string;
}

export class PolicyDenialError extends GatewayError {
  override readonly name = 'PolicyDenialError';

  constructor(
    private readonly denied: readonly DeniedMember[],
    private readonly batch: boolean,
  ) {
    super(403, 'access_denied', denied[0]?.message ?? 'denied by policy');
  }

  override body(): string {
    const errors = this.denied.map(({ id, message }) => ({ jsonrpc: '2.0', id, error: { code: DENIED_BY_POLICY_CODE, message, data: { error: 'access_denied' } } }));
    return JSON.stringify(this.batch ? errors : errors[0]);
  }
}

const WHY: Readonly<Record<string, string>> = {
  deny: 'and no scope would allow it',
  client: 'for this client',
  subject: 'for this user',
  condition: "(a rule's when could not be evaluated on this call)",
};

/** `decisions` are `messages`' decisions, in order; those refused by a rule (not for a missing scope) get an error each. */
export function policyDenial(messages: readonly JsonRpcMessage[], decisions: readonly MessageDecision[], batch: boolean): PolicyDenialError {
  const denied: DeniedMember[] = [];
  decisions.forEach((decision, i) => {
    if (decision.allow || decision.reason === 'scope') return;
    const message = messages[i]!;
    // A subscription is refused for a resource it watches (evaluate.ts), not for its method.
    const what = subscribedUris(message).length > 0 ? 'a resource this subscription watches' : describe(decision.operation);
    denied.push({ id: idOf(message) ?? null, message: `denied by policy: ${what} is not allowed ${WHY[decision.reason] ?? ''}`.trimEnd() });
  });
  return new PolicyDenialError(denied, batch);
}

function describe(operation: Operation | undefined): string {
  if (!operation) return 'this message';
  // Single quotes: a JSON-escaped double quote reads badly where clients print the raw body.
  if (operation.name === undefined) return `the method '${operation.method}'`;
  const name = `'${operation.name}'`;
  switch (operation.method) {
    case 'tools/call':
      return `the tool ${name}`;
    case 'resources/read':
      return `the resource ${name}`;
    case 'prompts/get':
      return `the prompt ${name}`;
    default:
      return `the method '${operation.method}'`;
  }
}
