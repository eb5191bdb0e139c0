// What one route has learnt of its tools' `Mcp-Param-*` headers, from the
// `tools/list` answers that passed through this gateway process. Kept in
// memory per route and per configuration load (a reload starts afresh, as
// the upstream may have changed with it); not shared between replicas.
import { MAX_NAME_LENGTH } from './json-rpc.js';
import { AmbiguousMemberError, checkMemberNames, readNames } from './member-names.js';
import { readToolParamHeaders, type ToolParamHeaders } from './tool-param-headers.js';

/** Most tools with annotations (or invalid ones) remembered per route; past it the oldest learnt is forgotten. */
export const MAX_TOOLS_WITH_PARAM_HEADERS = 1000;

const TOOL_MEMBERS = readNames('name', 'inputSchema');
const LISTED_TWICE: ToolParamHeaders = Object.freeze({ invalid: 'the tool list names this tool twice' });
const AMBIGUOUS: ToolParamHeaders = Object.freeze({ invalid: 'the tool definition has members that readers could read differently' });

export class ToolParamRegistry {
  /** By tool name; only tools with annotations or invalid ones (a tool without either needs no check). */
  private readonly tools = new Map<string, ToolParamHeaders>();

  constructor(private readonly maxTools = MAX_TOOLS_WITH_PARAM_HEADERS) {}

  /**
   * Learns from the `tools` of one tools/list result: each tool listed
   * replaces what was known of it (a page of a paginated list replaces the
   * tools on that page only).
   */
  learn(tools: readonly unknown[]): void {
    const listed = new Set<string>();
    for (const tool of tools) {
      if (typeof tool !== 'object' || tool === null || Array.isArray(tool)) continue;
      const { name, inputSchema } = tool as { name?: unknown; inputSchema?: unknown };
      // A name no call could carry (json-rpc.ts refuses longer ones) is not worth keeping.
      if (typeof name !== 'string' || name.length > MAX_NAME_LENGTH) continue;
      this.remember(name, listed.has(name) ? LISTED_TWICE : definitionOf(tool, inputSchema));
      listed.add(name);
    }
  }

  /** What is known of the tool's headers; undefined when it has none or was never listed here. */
  of(toolName: string): ToolParamHeaders | undefined {
    return this.tools.get(toolName);
  }

  /** How many tools are remembered (for tests of the bound). */
  get size(): number {
    return this.tools.size;
  }

  private remember(name: string, headers: ToolParamHeaders): void {
    // Deleted first so a relisted tool counts as the newest.
    this.tools.delete(name);
    if ('params' in headers && headers.params.length === 0) return;
    this.tools.set(name, headers);
    if (this.tools.size > this.maxTools) this.tools.delete(this.tools.keys().next().value!);
  }
}

function definitionOf(tool: object, inputSchema: unknown): ToolParamHeaders {
  try {
    checkMemberNames(tool, TOOL_MEMBERS, 'a tool');
  } catch (err) {
    if (err instanceof AmbiguousMemberError) return AMBIGUOUS;
    throw err;
  }
  return readToolParamHeaders(inputSchema);
}
