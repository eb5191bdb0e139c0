// The MCP tasks of one aggregated client session (DESIGN §8.2, §8.3): each
// task an upstream creates for the session is shown to the client under an id
// of the gateway's own (a random UUID), so two upstreams' ids never meet and
// the client never learns an upstream's; a `tasks/*` request by that id goes
// to the upstream that created the task, with the upstream's own id. A task
// the session did not see created is not the session's (so not its
// principal's): it is never routed, listed or notified. Bounded per session
// (the oldest forgotten first) and by the task's own ttl.
import { randomUUID } from 'node:crypto';
import { taskTtlMs } from '../../policy/task-ownership.js';

/** Tasks one client session holds at once; a new one beyond makes the session forget its oldest. */
export const MAX_TASKS_PER_SESSION = 256;

/** Where a shown task id leads: the upstream that created it and its own id there. */
export interface TaskPlace {
  upstream: string;
  taskId: string;
}

interface Entry extends TaskPlace {
  expires: number;
}

export class SessionTasks {
  /** Shown id → place, oldest first (Map keeps insertion order). */
  private readonly byShown = new Map<string, Entry>();
  /** `upstream \0 taskId` → shown id. */
  private readonly byPlace = new Map<string, string>();

  constructor(private readonly now: () => number = Date.now) {}

  /** The shown id of a task an upstream created for this session (recorded now, `ttl`/`ttlMs` as the upstream gave it). */
  created(upstream: string, taskId: string, ttl: unknown): string {
    const known = this.shownOf(upstream, taskId);
    if (known !== undefined) return known;
    if (this.byShown.size >= MAX_TASKS_PER_SESSION) this.forget(this.byShown.keys().next().value!);
    const shown = randomUUID();
    this.byShown.set(shown, { upstream, taskId, expires: this.now() + taskTtlMs(ttl) });
    this.byPlace.set(placeKey(upstream, taskId), shown);
    return shown;
  }

  /** The shown id of a task of this session at `upstream`; undefined for any other (not the session's). */
  shownOf(upstream: string, taskId: unknown): string | undefined {
    if (typeof taskId !== 'string') return undefined;
    const shown = this.byPlace.get(placeKey(upstream, taskId));
    return shown !== undefined && this.placeOf(shown) ? shown : undefined;
  }

  /** Where a shown id leads; undefined when the session has no such task (never had, expired, or forgotten). */
  placeOf(shown: unknown): TaskPlace | undefined {
    if (typeof shown !== 'string') return undefined;
    const entry = this.byShown.get(shown);
    if (entry === undefined) return undefined;
    if (entry.expires <= this.now()) return void this.forget(shown);
    return { upstream: entry.upstream, taskId: entry.taskId };
  }

  get size(): number {
    return this.byShown.size;
  }

  private forget(shown: string): void {
    const entry = this.byShown.get(shown);
    this.byShown.delete(shown);
    if (entry) this.byPlace.delete(placeKey(entry.upstream, entry.taskId));
  }
}

const placeKey = (upstream: string, taskId: string) => `${upstream}\0${taskId}`;
