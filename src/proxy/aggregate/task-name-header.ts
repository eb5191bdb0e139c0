// A 2026-07-28 `tasks/*` request names its task twice: `params.taskId` and the
// `Mcp-Name` header. A server refuses them disagreeing (-32020 at 400, SEP-2243).
// An aggregated route sends the upstream both rewritten to the upstream's own
// id (task-routing.ts), so the upstream can no longer see a disagreement: the
// route refuses it itself, as the upstream would have.
import type { IncomingHttpHeaders } from 'node:http';
import { decodeHeaderValue } from '../../policy/mcp-headers.js';

export const HEADER_MISMATCH = -32020;

/**
 * Whether a single message is a `tasks/*` request whose `Mcp-Name` (as the policy forwards it: a
 * substituted task's header names the substitute, `injected`) is not its `params.taskId`.
 */
export function taskNameMismatch(headers: IncomingHttpHeaders, injected: Readonly<Record<string, string>>, message: { method?: unknown; params?: unknown }): boolean {
  if (typeof message.method !== 'string' || !message.method.startsWith('tasks/')) return false;
  const raw = injected['mcp-name'] ?? headers['mcp-name'];
  if (typeof raw !== 'string') return false;
  const params = message.params;
  const taskId = typeof params === 'object' && params !== null && !Array.isArray(params) ? (params as Record<string, unknown>).taskId : undefined;
  return taskId === undefined || decodeHeaderValue(raw) !== taskId;
}
