// Which answers may teach a route its tools' `Mcp-Param-*` headers: only the
// answer to a `tools/list` request the gateway forwarded, by that request's
// id, once. The registry is the route's, shared by every principal, so a
// `result.tools` anywhere else — another result of a batch answer (a tool's
// own output), a server message on a stream, a second answer to the same id,
// an answer on a GET stream that asked nothing — must teach nothing: it could
// make another principal's calls refused or their headers go unchecked.
import { idKey, idOf, type JsonRpcMessage, type ParsedRequest } from './json-rpc.js';

export class ToolsListAnswers {
  private constructor(private readonly pending: Set<string>) {}

  /** The `tools/list` requests of one POST that expect an answer; undefined when there are none. */
  static of(request: ParsedRequest): ToolsListAnswers | undefined {
    let pending: Set<string> | undefined;
    for (const message of request.messages) {
      if (message.method !== 'tools/list') continue;
      const id = idOf(message);
      // A notification (no id) gets no answer; a null id is no request's.
      if (id === undefined || id === null) continue;
      (pending ??= new Set()).add(idKey(id));
    }
    return pending && new ToolsListAnswers(pending);
  }

  /** True, once, for the response answering one of those requests. */
  take(message: object): boolean {
    if ('method' in message) return false;
    const id = idOf(message as JsonRpcMessage);
    if (id === undefined || id === null) return false;
    return this.pending.delete(idKey(id));
  }
}
