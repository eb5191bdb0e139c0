// One 2026-07-28 request without a session on an aggregated route, from its
// first POST to its answer, across the client's rounds (DESIGN §8.2; MCP
// 2026-07-28 basic/patterns/mrtr). An upstream of a session-based revision asks
// the client something (sampling, elicitation, roots) on the stream of its
// answer; a client of 2026-07-28 has no stream to answer on, so the gateway does
// what a server of that revision does: the round's POST is answered with an
// InputRequiredResult naming what was asked (keyed by the gateway's ids,
// server-requests.ts), the upstream's request is kept open, and the client's
// retry (input-rounds.ts) brings the answers, which go to the upstream that
// asked; then the call waits again, for the next question or the answer. The
// upstream's progress goes to the POST of the round under way, with that POST's
// own progress token, as an event stream when the client takes one (bounded as
// a session's POST streams are, post-stream.ts). Nothing else an upstream sends
// with the call is passed on.
import type { PostStream } from './post-stream.js';
import type { MessageChannel } from './session-streams.js';
import type { JsonRpcAnswer } from './upstream-link.js';

/** What an upstream may ask the client during a call, and the client capability each needs (MRTR's input requests). */
const CAPABILITY_OF: Readonly<Record<string, string>> = { 'elicitation/create': 'elicitation', 'sampling/createMessage': 'sampling', 'roots/list': 'roots' };
/** The requests a server of 2026-07-28 may answer with an InputRequiredResult (MRTR, "Supported Requests"). */
const ROUND_METHODS: ReadonlySet<string> = new Set(['tools/call', 'prompts/get', 'resources/read']);
/**
 * Bytes of the upstreams' requests one call holds for its client's next round; beyond, a request
 * is not taken here (server-requests.ts holds it, within its own bound, until this call has room).
 */
export const MAX_ASKED_BYTES = 1024 * 1024;

export type CallOutcome = { answer: JsonRpcAnswer } | { failed: unknown };
/** An upstream's request as an InputRequiredResult names it. */
export interface InputRequest {
  method: string;
  params?: unknown;
}
/** How one round of the client's ends: with the call's outcome, or with what the upstreams asked (the gateway's id → request). */
export type RoundEnd = CallOutcome | { asked: Record<string, InputRequest> };

/** The client's POST of the round under way. */
export interface Round {
  post: PostStream;
  /** Its `_meta.progressToken`: the upstream's progress is written with it (none: not written). */
  progressToken: unknown;
  /** Its `_meta` client capabilities: what an upstream may ask it. */
  capabilities: Record<string, unknown>;
}

interface Asked extends InputRequest {
  bytes: number;
}

export class SessionLessCall implements MessageChannel {
  /** Aborted when the client closes a round's POST (or its session ends): the upstream is told. */
  readonly controller = new AbortController();
  /** The upstream the call was routed to (set as it is sent). */
  upstream?: string;
  private readonly asked = new Map<string, Asked>();
  private round?: Round;
  private outcome?: CallOutcome;
  private wake?: () => void;
  private readonly settledHooks: (() => void)[] = [];

  constructor(
    readonly method: string,
    /** The request this call answers (method, name or URI, a digest of its arguments): a retry must name the same. */
    readonly identity: string,
    /** The client capabilities of the round under way (at first, the request's own). */
    private capabilities: Record<string, unknown>,
    /** Whether this call may hold questions for its client (input-rounds.ts bounds them per session). */
    private readonly admit: (call: SessionLessCall) => boolean,
  ) {}

  /** The upstream's answer to the request: the call's outcome once it comes, whatever the rounds. */
  run(answer: Promise<JsonRpcAnswer>): void {
    void answer.then(
      (a) => this.settle({ answer: a }),
      (failed: unknown) => this.settle({ failed }),
    );
  }

  get open(): boolean {
    return this.outcome === undefined;
  }

  /** Its questions are taken while it runs (they reach the client in its next round's answer). */
  get connected(): boolean {
    return this.open;
  }

  /** Runs `hook` once the outcome is in (at once if it is). */
  onSettled(hook: () => void): void {
    if (this.outcome) hook();
    else this.settledHooks.push(hook);
  }

  abort(reason: string): void {
    this.controller.abort(reason);
  }

  /** An upstream's request may become an input request: one this revision carries, that this round's client declared, within the bounds. */
  takes(method: string): boolean {
    const capability = CAPABILITY_OF[method];
    return this.open && ROUND_METHODS.has(this.method) && capability !== undefined && isRecord(this.capabilities[capability]) && this.admit(this);
  }

  /** What the upstream sent with the call: its request (under the gateway's id), the cancellation of one, its progress; nothing else is taken. */
  send(message: object): boolean {
    if (!this.open) return false;
    const m = message as { id?: unknown; method?: unknown; params?: unknown };
    const params = isRecord(m.params) ? m.params : undefined;
    if (typeof m.id === 'string' && typeof m.method === 'string') return this.ask(m.id, m.method, m.params);
    if (m.method === 'notifications/cancelled') {
      this.asked.delete(String(params?.requestId));
      return true;
    }
    if (m.method === 'notifications/progress' && params) return this.progress(params);
    return false;
  }

  /**
   * One round: resolves with the outcome, or with what the upstreams asked (the requests an
   * upstream sends at once come in one round); the round's POST carries the progress meanwhile.
   */
  async attend(round: Round): Promise<RoundEnd> {
    this.round = round;
    this.capabilities = round.capabilities;
    try {
      for (;;) {
        const outcome = this.outcome;
        if (outcome) return outcome;
        if (this.asked.size > 0) {
          await new Promise((resolve) => setImmediate(resolve));
          return this.outcome ?? { asked: this.questions() };
        }
        await new Promise<void>((resolve) => (this.wake = resolve));
      }
    } finally {
      this.round = undefined;
      this.wake = undefined;
    }
  }

  /**
   * The answers of the client's retry that answer a question of this call still open, as the
   * upstreams' requests take them; taken from what is asked. Others are ignored (MRTR), and a
   * question left unanswered is asked again in the next round.
   */
  answers(responses: Record<string, unknown>): { id: string; result: Record<string, unknown> }[] {
    const taken: { id: string; result: Record<string, unknown> }[] = [];
    for (const [id, result] of Object.entries(responses)) {
      if (!this.asked.has(id) || !isRecord(result)) continue;
      this.asked.delete(id);
      taken.push({ id, result });
    }
    return taken;
  }

  /** The questions open now, as an InputRequiredResult names them. */
  private questions(): Record<string, InputRequest> {
    return Object.fromEntries([...this.asked].map(([id, { method, params }]) => [id, { method, ...(params !== undefined && { params }) }]));
  }

  private ask(id: string, method: string, params: unknown): boolean {
    const bytes = JSON.stringify(params ?? null).length;
    let held = 0;
    for (const a of this.asked.values()) held += a.bytes;
    if (held + bytes > MAX_ASKED_BYTES) return false;
    this.asked.set(id, { method, ...(params !== undefined && { params }), bytes });
    this.wake?.();
    return true;
  }

  /** The upstream's progress (on the gateway's token), written to this round's POST with its own token. */
  private progress(params: Record<string, unknown>): boolean {
    const round = this.round;
    if (round?.progressToken === undefined) return false;
    return round.post.send({ jsonrpc: '2.0', method: 'notifications/progress', params: { ...params, progressToken: round.progressToken } });
  }

  private settle(outcome: CallOutcome): void {
    if (this.outcome) return;
    this.outcome = outcome;
    this.asked.clear();
    this.wake?.();
    for (const hook of this.settledHooks.splice(0)) hook();
  }
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
