/**
 * Session admission (src/proxy/session-admission.ts), shared by stdio processes and legacy SSE
 * streams: a hand-written case for each rule, then a fast-check property over random sequences
 * of claims, requests starting and ending, sessions closing and processes exiting by several
 * principals — never more slots than the route's cap or a principal's, a principal (at its cap
 * or on a full route) only ever makes room from its own sessions, and a claim is refused only when nothing can make
 * room (every candidate busy or still starting).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { admit, SessionAdmission, type Slot } from '../../src/proxy/session-admission.js';

interface Session {
  owner: string;
  busy: boolean;
  lastActivity: number;
}

let clock = 0;
const session = (owner: string, busy = false): Session => ({ owner, busy, lastActivity: ++clock });

/** Claims and opens a session at once (the slot must be free). */
function openOne(admission: SessionAdmission<Session>, owner: string, busy = false): Session {
  const claim = admission.claim(owner);
  if ('refused' in claim) throw new Error(`refused: ${claim.refused}`);
  expect(claim.slot.waiting).toBe(false);
  const s = session(owner, busy);
  admission.open(claim.slot, s);
  return s;
}

describe('session admission, case by case', () => {
  it('a principal at its cap: its least recently used idle session makes room, not the newest, not a busy one, never another principal\'s', () => {
    const admission = new SessionAdmission<Session>({ perRoute: 10, perPrincipal: 3 });
    const bob = openOne(admission, 'bob');
    const [oldBusy, oldest, newer] = [openOne(admission, 'alice', true), openOne(admission, 'alice'), openOne(admission, 'alice')];
    const claim = admission.claim('alice');
    expect(claim).toMatchObject({ evict: oldest });
    expect([oldBusy, newer, bob]).not.toContain((claim as { evict: Session }).evict);
    const slot = (claim as { slot: Slot<Session> }).slot;
    expect(slot.waiting).toBe(true);
    expect(admission.heldBy('alice')).toBe(3);
    expect(admission.size).toBe(4);
    // The evicted session goes; then the slot is the claimer's.
    admission.closing(oldest);
    admission.release(oldest);
    expect(slot.waiting).toBe(false);
    admission.open(slot, session('alice'));
    expect(admission.heldBy('alice')).toBe(3);
    expect(admission.size).toBe(4);
  });

  it('a principal at its cap with every session busy is refused; bob still gets his', () => {
    const admission = new SessionAdmission<Session>({ perRoute: 10, perPrincipal: 2 });
    openOne(admission, 'alice', true);
    openOne(admission, 'alice', true);
    expect(admission.claim('alice')).toEqual({ refused: 'principal' });
    expect('slot' in admission.claim('bob')).toBe(true);
  });

  it('a full route makes room only from the claimer\'s own idle sessions (least recently used first): another principal\'s idle session is never ended', () => {
    const admission = new SessionAdmission<Session>({ perRoute: 3, perPrincipal: 3 });
    const alice = openOne(admission, 'alice');
    const [carolOld, carolNew] = [openOne(admission, 'carol'), openOne(admission, 'carol')];
    // carol's idle sessions are older than alice's own busy one: still never dave's to take.
    expect(admission.claim('dave')).toEqual({ refused: 'route' });
    expect(admission.claim('carol')).toMatchObject({ evict: carolOld });
    expect([alice, carolNew]).not.toContain(carolOld);
    expect(admission.heldBy('alice')).toBe(1);
    expect(admission.heldBy('carol')).toBe(2);
  });

  it('a route full of busy ones refuses everyone; a session ending (anyone\'s) makes room for anyone', () => {
    const admission = new SessionAdmission<Session>({ perRoute: 2, perPrincipal: 2 });
    const a = openOne(admission, 'alice', true);
    openOne(admission, 'bob', true);
    expect(admission.claim('carol')).toEqual({ refused: 'route' });
    expect(admission.claim('alice')).toEqual({ refused: 'route' });
    admission.closing(a);
    const claim = admission.claim('carol');
    expect(claim).not.toHaveProperty('evict');
    expect((claim as { slot: Slot<Session> }).slot.waiting).toBe(true);
  });

  it('a session already ending makes room first, and its slot counts until it is gone', () => {
    const admission = new SessionAdmission<Session>({ perRoute: 2, perPrincipal: 2 });
    const ending = openOne(admission, 'alice');
    const idle = openOne(admission, 'alice');
    admission.closing(ending);
    expect(admission.size).toBe(2);
    const claim = admission.claim('alice');
    expect(claim).not.toHaveProperty('evict');
    expect(idle.busy).toBe(false);
    expect((claim as { slot: Slot<Session> }).slot.waiting).toBe(true);
  });

  it('a slot whose start is abandoned is free again, also when abandoned while waiting', () => {
    const admission = new SessionAdmission<Session>({ perRoute: 1, perPrincipal: 1 });
    const first = admission.claim('alice') as { slot: Slot<Session> };
    admission.abandon(first.slot);
    expect(admission.size).toBe(0);
    const s = openOne(admission, 'alice');
    const second = admission.claim('alice') as { slot: Slot<Session>; evict: Session };
    expect(second.evict).toBe(s);
    admission.abandon(second.slot);
    admission.release(s);
    expect(admission.size).toBe(0);
  });

  it('admit() turns a refusal into 503 with Retry-After and logs the setting that refused it', () => {
    const admission = new SessionAdmission<Session>({ perRoute: 5, perPrincipal: 1 });
    openOne(admission, 'alice', true);
    const logged: Array<{ obj: object; msg: string }> = [];
    const context = { route: '/r', logger: { warn: (obj: object, msg: string) => logged.push({ obj, msg }) }, settings: { route: 'max_x', principal: 'max_x_per_principal' } };
    expect(() => admit(admission, 'alice', context)).toThrow(expect.objectContaining({ status: 503, code: 'temporarily_unavailable', headers: { 'retry-after': '5' } }));
    expect(logged).toEqual([{ obj: { route: '/r', max_x_per_principal: 1 }, msg: 'max_x_per_principal reached and every session busy: refused' }]);
  });
});

type Op =
  | { kind: 'claim'; owner: number }
  | { kind: 'busy'; pick: number; busy: boolean }
  | { kind: 'close'; pick: number }
  | { kind: 'gone'; pick: number }
  | { kind: 'start'; pick: number; fail: boolean };

const ops = (owners: number) =>
  fc.array(
    fc.oneof(
      { arbitrary: fc.record({ kind: fc.constant('claim' as const), owner: fc.nat(owners - 1) }), weight: 4 },
      fc.record({ kind: fc.constant('busy' as const), pick: fc.nat(), busy: fc.boolean() }),
      fc.record({ kind: fc.constant('close' as const), pick: fc.nat() }),
      { arbitrary: fc.record({ kind: fc.constant('gone' as const), pick: fc.nat() }), weight: 2 },
      { arbitrary: fc.record({ kind: fc.constant('start' as const), pick: fc.nat(), fail: fc.boolean() }), weight: 3 },
    ),
    { maxLength: 120 },
  );

/** The world around the admission: sessions open, ending (not gone yet), and claims waiting to start. */
class Model {
  readonly open: Session[] = [];
  /** Ending sessions; `taken`: their slot was claimed meanwhile (it counts once, for its claimer). */
  readonly ending: Array<{ s: Session; taken: boolean }> = [];
  readonly starting: Array<{ owner: string; slot: Slot<Session> }> = [];
  constructor(
    readonly admission: SessionAdmission<Session>,
    readonly limits: { perRoute: number; perPrincipal: number },
  ) {}

  /** Sessions that no claim may take: busy, or not started yet. */
  private unmovable(owner?: string): boolean {
    const mine = (o: string) => owner === undefined || o === owner;
    return this.open.filter((s) => mine(s.owner)).every((s) => s.busy) && !this.ending.some((e) => !e.taken && mine(e.s.owner));
  }

  claim(owner: string): void {
    const before = this.admission.heldBy(owner);
    const full = this.admission.size >= this.limits.perRoute;
    const claim = this.admission.claim(owner);
    if ('refused' in claim) {
      // Refused only when nothing could make room: at its cap, none of its own; on a full route, none at all.
      if (claim.refused === 'principal') {
        expect(before).toBe(this.limits.perPrincipal);
        expect(this.unmovable(owner)).toBe(true);
      } else {
        expect(before).toBeLessThan(this.limits.perPrincipal);
        expect(full).toBe(true);
        // Nothing of its own to end, and nobody's session already ending.
        expect(this.unmovable(owner) && !this.ending.some((e) => !e.taken)).toBe(true);
      }
      return;
    }
    if (claim.evict !== undefined) {
      expect(claim.evict.busy).toBe(false);
      // [K66] only ever the claimer's own session is ended to make room.
      expect(claim.evict.owner).toBe(owner);
      this.open.splice(this.open.indexOf(claim.evict), 1);
      this.admission.closing(claim.evict);
      this.ending.push({ s: claim.evict, taken: true });
    } else if (claim.slot.waiting) {
      this.ending.find((e) => e.s === claim.slot.occupant)!.taken = true;
    }
    // Room is made only when needed; a principal at its cap makes it from its own sessions only.
    expect(claim.slot.waiting).toBe(full || before === this.limits.perPrincipal);
    if (before === this.limits.perPrincipal) expect(claim.slot.occupant?.owner).toBe(owner);
    this.starting.push({ owner, slot: claim.slot });
  }

  step(op: Op): void {
    if (op.kind === 'claim') return this.claim(`p${op.owner}`);
    if (op.kind === 'busy' && this.open.length > 0) {
      const s = this.open[op.pick % this.open.length]!;
      s.busy = op.busy;
      s.lastActivity = ++clock;
    } else if (op.kind === 'close' && this.open.length > 0) {
      const [s] = this.open.splice(op.pick % this.open.length, 1);
      this.admission.closing(s!);
      this.ending.push({ s: s!, taken: false });
    } else if (op.kind === 'gone' && this.ending.length > 0) {
      const [e] = this.ending.splice(op.pick % this.ending.length, 1);
      this.admission.release(e!.s);
    } else if (op.kind === 'start') {
      this.start(op.pick, op.fail);
    }
  }

  /** A claim whose slot is free starts its session (or fails to). */
  private start(pick: number, fail: boolean): void {
    const ready = this.starting.filter((c) => !c.slot.waiting);
    if (ready.length === 0) return;
    const claim = ready[pick % ready.length]!;
    this.starting.splice(this.starting.indexOf(claim), 1);
    if (fail) return this.admission.abandon(claim.slot);
    const s = session(claim.owner);
    this.admission.open(claim.slot, s);
    this.open.push(s);
  }

  checkBounds(owners: number): void {
    expect(this.admission.size).toBeLessThanOrEqual(this.limits.perRoute);
    for (let p = 0; p < owners; p++) expect(this.admission.heldBy(`p${p}`)).toBeLessThanOrEqual(this.limits.perPrincipal);
    // Every slot is accounted for: open, ending, or claimed.
    const claimedOverEnding = this.starting.filter((c) => c.slot.waiting).length;
    expect(this.admission.size).toBe(this.open.length + this.ending.length + this.starting.length - claimedOverEnding);
  }
}

describe('session admission, property', () => {
  it('never more than the route cap or a principal cap; a principal at its cap makes room from its own; refused only when nothing can make room', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 6 }).chain((perRoute) => fc.record({ perRoute: fc.constant(perRoute), perPrincipal: fc.integer({ min: 1, max: perRoute }) })),
        fc.integer({ min: 1, max: 4 }).chain((owners) => fc.tuple(fc.constant(owners), ops(owners))),
        (limits, [owners, sequence]) => {
          const model = new Model(new SessionAdmission<Session>(limits), limits);
          for (const op of sequence) {
            model.step(op);
            model.checkBounds(owners);
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});
