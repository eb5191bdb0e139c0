// The capabilities an aggregated route announces (DESIGN §8.2): what some
// upstream announced in its answer to the session's opening, of what the
// route can pass on. `initialize` (the session-based revisions) gets tasks as
// those revisions name them; `server/discover` (2026-07-28) the tasks
// extension where some upstream of that revision announced it.

/** The 2026-07-28 tasks extension's name in capabilities. */
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

/** The capabilities whose lists may change (`listChanged`). */
const LISTED = new Set(['tools', 'prompts', 'resources']);

type Capabilities = Record<string, Record<string, unknown>>;

/**
 * What some upstream offers among tools, prompts, resources, completions and logging, listChanged
 * where some upstream sends it, and resources' subscribe where some upstream takes it; tasks
 * (`list`, `cancel`, task-augmented `tools/call`) where some upstream offers them.
 */
export function capabilitiesOf(results: readonly (Record<string, unknown> | undefined)[], revision: 'session' | 'modern' = 'session'): Capabilities {
  const capabilities: Capabilities = {};
  for (const r of results) {
    const offered = isRecord(r?.capabilities) ? r.capabilities : {};
    for (const key of ['tools', 'prompts', 'resources', 'completions', 'logging']) {
      const kind = offered[key];
      if (!isRecord(kind)) continue;
      capabilities[key] ??= {};
      if (LISTED.has(key) && kind.listChanged === true) capabilities[key].listChanged = true;
      if (key === 'resources' && kind.subscribe === true) capabilities[key].subscribe = true;
    }
    if (revision === 'session' && isRecord(offered.tasks)) mergeTasks((capabilities.tasks ??= {}), offered.tasks);
    if (revision === 'modern' && isRecord(offered.extensions) && isRecord(offered.extensions[TASKS_EXTENSION])) capabilities.extensions = { [TASKS_EXTENSION]: {} };
  }
  return capabilities;
}

/** The parts of an upstream's tasks capability the route serves: listing, cancelling, and tools/call made a task. */
function mergeTasks(into: Record<string, unknown>, offered: Record<string, unknown>): void {
  if (isRecord(offered.list)) into.list = {};
  if (isRecord(offered.cancel)) into.cancel = {};
  const requests = offered.requests;
  if (isRecord(requests) && isRecord(requests.tools) && isRecord(requests.tools.call)) into.requests = { tools: { call: {} } };
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
