// The events one aggregated session wrote to its client's streams, kept so
// that a client that lost a stream can resume it with `Last-Event-ID` (MCP
// Streamable HTTP, resumability). One buffer per session, over all its
// streams, bounded in events and bytes: the oldest event falls out first, and
// its stream is told (client-event-stream.ts), so what was lost is answered
// on a resume rather than passed over in silence. An event larger than the
// whole buffer is never kept.

/** Events of one session kept for resumption, over all its streams. */
export const MAX_REPLAY_EVENTS = 1024;
/** Their bytes (the unread bound of a session is as large: a client reads what it lost at most twice). */
export const MAX_REPLAY_BYTES = 1024 * 1024;

/** The stream an event was written to: told when one of its events falls out. */
export interface ReplayOwner {
  fellOut(event: KeptEvent): void;
}

export interface KeptEvent {
  owner: ReplayOwner;
  seq: number;
  /** The event as it was written (its `id:` line included), before the response's transform. */
  event: Buffer;
  /** What the client is sent instead when this event fell out before it read it (none: nothing). */
  lost?: () => object | undefined;
}

export class ReplayBuffer {
  private events: KeptEvent[] = [];
  private bytes = 0;

  constructor(
    private readonly maxEvents = MAX_REPLAY_EVENTS,
    private readonly maxBytes = MAX_REPLAY_BYTES,
  ) {}

  /** Keeps `kept`, the oldest events falling out to make room. */
  keep(kept: KeptEvent): void {
    if (kept.event.length > this.maxBytes) return kept.owner.fellOut(kept);
    this.events.push(kept);
    this.bytes += kept.event.length;
    let drop = 0;
    let bytes = this.bytes;
    while (this.events.length - drop > this.maxEvents || bytes > this.maxBytes) bytes -= this.events[drop++]!.event.length;
    if (drop === 0) return;
    const gone = this.events.slice(0, drop);
    this.events = this.events.slice(drop);
    this.bytes = bytes;
    for (const old of gone) old.owner.fellOut(old);
  }

  /** `owner`'s events after `seq`, oldest first. */
  after(owner: ReplayOwner, seq: number): KeptEvent[] {
    return this.events.filter((e) => e.owner === owner && e.seq > seq);
  }

  /** Every event of `owner` goes (its stream is forgotten), none told. */
  forget(owner: ReplayOwner): void {
    const kept = this.events.filter((e) => e.owner !== owner);
    if (kept.length === this.events.length) return;
    this.events = kept;
    this.bytes = kept.reduce((n, e) => n + e.event.length, 0);
  }

  /** Bytes held now. */
  get size(): number {
    return this.bytes;
  }
}
