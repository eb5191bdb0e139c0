// `Mcp-Param-{Name}` headers held to the body (MCP 2026-07-28,
// basic/transports/streamable-http.mdx, "Server Behavior for Custom Headers",
// lines 546-566, and "Server Validation", lines 580-607). An intermediary may
// route or authorise on `Mcp-Param-Region: eu` while the body says `us`; for a
// tool whose annotations the route has learnt from a `tools/list` answer,
// every mirrored argument must have its header with the value the spec's
// encoding gives it, and no header may stand for an argument the body lacks.
// A tool never listed through this gateway process is forwarded unchecked
// (the upstream must validate, line 555): the gateway cannot know its headers.
import { GatewayError } from '../errors/gateway-error.js';
import type { IncomingHttpHeaders } from 'node:http';
import type { ParsedRequest } from './json-rpc.js';
import { idOf } from './json-rpc.js';
import { requiresRequestHeaders } from './header-revision.js';
import { decodeHeaderValue, HeaderMismatchError } from './mcp-headers.js';
import { AmbiguousMemberError, checkMemberNames } from './member-names.js';
import type { ParamHeader } from './tool-param-headers.js';
import type { ToolParamRegistry } from './tool-param-registry.js';

const PARAM_PREFIX = 'mcp-param-';

type Fail = (message: string) => never;

/**
 * Throws HeaderMismatchError (400, -32020) when an `Mcp-Param-*` header of a
 * known tool disagrees with the body, and a 400 GatewayError when the body
 * holds a mirrored argument twice under names readers could confuse.
 */
export function checkParamHeaders(headers: IncomingHttpHeaders, request: ParsedRequest, registry: ToolParamRegistry): void {
  const message = request.messages[0]!;
  const fail: Fail = (why) => {
    throw new HeaderMismatchError(why, request.batch ? null : (idOf(message) ?? null));
  };
  if (request.batch) {
    // Like Mcp-Method and Mcp-Name: headers describe one message.
    if (Object.keys(headers).some((name) => name.startsWith(PARAM_PREFIX))) fail('Mcp-Param headers describe a single message, not a batch');
    return;
  }
  if (message.method !== 'tools/call') return;
  const params = message.params as { name: string; arguments?: unknown };
  const known = registry.of(params.name);
  if (known === undefined) return;
  // Lines 563-566, by the revision the request names: from 2026-07-28 an argument with a value must have its header.
  const required = requiresRequestHeaders(headers);
  if ('invalid' in known) {
    // Line 402: clients of this revision drop such a tool from their list; a call to it mirrors nothing one could check.
    if (required) fail(`The tool's definition is one clients must reject: ${known.invalid}`);
    return;
  }
  for (const param of known.params) checkParam(param, valueAt(params.arguments, param), headers[param.header], required, fail);
}

function checkParam(param: ParamHeader, value: unknown, header: string | string[] | undefined, required: boolean, fail: Fail): void {
  if (Array.isArray(header)) fail(`${param.display} appears more than once`);
  // Lines 564-565: a null or absent argument has no header, and none is expected.
  if (value === undefined || value === null) {
    if (header !== undefined) fail(`${param.display} is present but the body has no value for its argument`);
    return;
  }
  const expected = headerForm(value);
  if (expected === undefined) {
    if (header !== undefined || required) fail(`The argument ${param.display} mirrors is not a string, a safe integer or a boolean`);
    return;
  }
  if (header === undefined) {
    // Line 566: "Client omits header but value is in body" — "Server MUST reject the request".
    if (required) fail(`${param.display} is missing while the body has a value for its argument`);
    return;
  }
  if (decodeHeaderValue(header) !== expected) fail(`${param.display} does not match the body`);
}

/**
 * Lines 472-476, the header form of an argument: a string as it is, an
 * integer in decimal, a boolean as `true`/`false`; undefined for anything else
 * (line 384 allows no other type; line 386 bounds integers to ±(2^53-1)). The
 * decimal form is compared as a string: `42.0`, `042` or `+42` is refused
 * although line 591 lets a server compare numerically, because an
 * intermediary keying on the header would take it for another value than `42`.
 */
function headerForm(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  // String(-0) is "0", as a client writes it.
  if (typeof value === 'number' && Number.isSafeInteger(value)) return String(value);
  return undefined;
}

/**
 * Line 397: the instance value at the exact chain of property keys; an object
 * on the way that is absent, or not an object, means no value. Each object
 * passed must spell the key one way only (`Region` beside `region` reads as
 * another argument to Go's case-insensitive decoder).
 */
function valueAt(args: unknown, param: ParamHeader): unknown {
  let value = args;
  for (let i = 0; i < param.path.length; i++) {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
    const key = param.path[i]!;
    try {
      checkMemberNames(value, param.names[i]!, 'arguments');
    } catch (err) {
      if (err instanceof AmbiguousMemberError) throw new GatewayError(400, 'invalid_request', `The body could be read in more than one way: the argument ${param.display} mirrors is spelled more than one way`);
      throw err;
    }
    value = Object.prototype.hasOwnProperty.call(value, key) ? (value as Record<string, unknown>)[key] : undefined;
  }
  return value;
}
