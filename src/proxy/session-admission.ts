// Who gets a session on one route (stdio processes, legacy SSE streams): at
// most `perRoute` slots at once, and at most `perPrincipal` of one principal,
// so one principal cannot take every slot and deny everyone else. A slot is
// held from its claim until what it holds is gone (a stdio process exited,
// not merely signalled), so the bounds hold for processes, not only for ids.
// Room is made only from the claimer's own slots with no request in flight,
// its least recently used one first, at its cap and on a full route alike:
// another principal's session is never ended to make room (DESIGN.md §8.3,
// [K66]). A slot already ending goes first, whoever held it (that costs no one
// anything). A claim nothing can make room for is refused: the caller answers
// 503 with Retry-After. The owner is the user (auth/principal.ts `userKey`),
// so one user's many clients share one share ([K81]).
import { GatewayError } from '../errors/gateway-error.js';

/** What a slot holds, as admission sees it. */
export interface Occupant {
  /** A request is in flight (or the session is being set up): never ended to make room. */
  readonly busy: boolean;
  /** When something last reached its client (Date.now()); the least recent goes first. */
  readonly lastActivity: number;
}

export interface AdmissionLimits {
  perRoute: number;
  perPrincipal: number;
}

/** Which bound refused a claim. */
export type Refusal = 'route' | 'principal';

/** What a client refused a session is told to wait: sessions end all the time, so soon. */
export const ADMISSION_RETRY_AFTER_SECONDS = 5;

export const admissionRefused = (description: string) =>
  new GatewayError(503, 'temporarily_unavailable', description, { headers: { 'retry-after': String(ADMISSION_RETRY_AFTER_SECONDS) } });

export class Slot<T extends Occupant> {
  /** starting: claimed, its occupant not in place yet; open: in use; closing: its occupant is ending. */
  state: 'starting' | 'open' | 'closing' = 'starting';
  occupant: T | undefined;
  /** The previous occupant is still going away: the claimer waits for `vacant`. */
  waiting = false;
  /** Its claimer gave up while it was waiting: removed once vacant. */
  abandoned = false;
  /** Resolves once the slot is free for its claimer. */
  vacant: Promise<void> = Promise.resolve();
  private resolveVacant: (() => void) | undefined;

  constructor(public owner: string) {}

  /** Taken over by a new claimer while its occupant (if any) still goes away. */
  handOver(owner: string): void {
    this.owner = owner;
    this.state = 'starting';
    if (this.occupant === undefined) return;
    this.waiting = true;
    this.vacant = new Promise((resolve) => (this.resolveVacant = resolve));
  }

  /** The occupant is gone; a waiting claimer may go on. */
  vacate(): void {
    this.occupant = undefined;
    this.waiting = false;
    this.resolveVacant?.();
    this.resolveVacant = undefined;
  }
}

export type Claim<T extends Occupant> = { slot: Slot<T>; evict?: T } | { refused: Refusal };

export class SessionAdmission<T extends Occupant> {
  private readonly slots = new Set<Slot<T>>();
  private readonly byOwner = new Map<string, Set<Slot<T>>>();
  private readonly slotOf = new Map<T, Slot<T>>();

  constructor(readonly limits: AdmissionLimits) {}

  /** Slots held now, every state counted. */
  get size(): number {
    return this.slots.size;
  }

  heldBy(owner: string): number {
    return this.byOwner.get(owner)?.size ?? 0;
  }

  /** Every occupant in place: open or closing, or only the open ones. */
  occupants(openOnly = false): T[] {
    return [...this.slotOf].flatMap(([occupant, slot]) => (!openOnly || slot.state === 'open' ? [occupant] : []));
  }

  /**
   * A slot for a new session of `owner`. With `evict`, the caller ends that
   * occupant (and releases it when gone); the slot is free once `vacant` resolves.
   */
  claim(owner: string): Claim<T> {
    if (this.heldBy(owner) >= this.limits.perPrincipal) return this.takeFrom(owner, this.byOwner.get(owner)!, 'principal');
    if (this.slots.size >= this.limits.perRoute) return this.takeFrom(owner, this.ownOrClosing(owner), 'route');
    const slot = new Slot<T>(owner);
    this.slots.add(slot);
    this.ownedBy(owner).add(slot);
    return { slot };
  }

  /** The claimed slot's occupant is in place. */
  open(slot: Slot<T>, occupant: T): void {
    slot.occupant = occupant;
    slot.state = 'open';
    this.slotOf.set(occupant, slot);
  }

  /** The occupant is ending (stopped, deleted): its slot stays counted until release(), but may be claimed meanwhile. */
  closing(occupant: T): void {
    const slot = this.slotOf.get(occupant);
    if (slot?.state === 'open') slot.state = 'closing';
  }

  /** The occupant is gone: its slot is free, or its claimer's from now on. */
  release(occupant: T): void {
    const slot = this.slotOf.get(occupant);
    if (slot === undefined) return;
    this.slotOf.delete(occupant);
    if (!slot.waiting || slot.abandoned) return this.remove(slot);
    slot.vacate();
  }

  /** A claimed slot whose session never started (its start failed, or shutdown). */
  abandon(slot: Slot<T>): void {
    if (slot.state !== 'starting') return;
    if (slot.waiting) slot.abandoned = true;
    else this.remove(slot);
  }

  private takeFrom(owner: string, candidates: Iterable<Slot<T>>, refusal: Refusal): Claim<T> {
    const slot = leastRecentlyUsedIdle(candidates);
    if (slot === undefined) return { refused: refusal };
    const evict = slot.state === 'open' ? slot.occupant : undefined;
    this.byOwner.get(slot.owner)?.delete(slot);
    this.dropIfEmpty(slot.owner);
    slot.handOver(owner);
    this.ownedBy(owner).add(slot);
    return evict === undefined ? { slot } : { slot, evict };
  }

  /** On a full route: any slot already ending, else only the claimer's own. */
  private *ownOrClosing(owner: string): Iterable<Slot<T>> {
    for (const slot of this.slots) if (slot.state === 'closing' || slot.owner === owner) yield slot;
  }

  private ownedBy(owner: string): Set<Slot<T>> {
    let owned = this.byOwner.get(owner);
    if (owned === undefined) this.byOwner.set(owner, (owned = new Set()));
    return owned;
  }

  private remove(slot: Slot<T>): void {
    this.slots.delete(slot);
    this.byOwner.get(slot.owner)?.delete(slot);
    this.dropIfEmpty(slot.owner);
  }

  private dropIfEmpty(owner: string): void {
    if (this.byOwner.get(owner)?.size === 0) this.byOwner.delete(owner);
  }
}

/** A closing slot first (free to take), else the open one with no request in flight whose client heard from it least recently. */
function leastRecentlyUsedIdle<T extends Occupant>(candidates: Iterable<Slot<T>>): Slot<T> | undefined {
  let best: Slot<T> | undefined;
  for (const slot of candidates) {
    if (slot.state === 'closing') return slot;
    if (slot.state !== 'open' || slot.occupant === undefined || slot.occupant.busy) continue;
    if (best === undefined || slot.occupant.lastActivity < best.occupant!.lastActivity) best = slot;
  }
  return best;
}

export interface AdmissionContext {
  route: string;
  logger?: { warn(obj: object, msg: string): void };
  /** The settings the two bounds are, as the configuration names them (for the log and the client). */
  settings: Record<Refusal, string>;
}

/** claim(), or the client's 503 with Retry-After, logged as the bound that refused it. */
export function admit<T extends Occupant>(admission: SessionAdmission<T>, owner: string, { route, logger, settings }: AdmissionContext): { slot: Slot<T>; evict?: T } {
  const claim = admission.claim(owner);
  if (!('refused' in claim)) return claim;
  const setting = settings[claim.refused];
  const limit = claim.refused === 'route' ? admission.limits.perRoute : admission.limits.perPrincipal;
  // On a full route another principal's idle sessions are there, but never ended for this one.
  const why = claim.refused === 'route' ? 'none of this caller idle' : 'every session busy';
  logger?.warn({ route, [setting]: limit }, `${setting} reached and ${why}: refused`);
  throw admissionRefused(claim.refused === 'route' ? 'Too many sessions on this route; try again later' : 'Too many sessions of this caller, all busy; try again later');
}
