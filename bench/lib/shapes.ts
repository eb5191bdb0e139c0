// The traffic shapes of the throughput measure, and the targets measured in each.
//   a      one client per connection: one token, the same on every request of every
//          connection (a sidecar behind a single agent); the gateway recalls it per connection.
//   b16    many users multiplexed per connection (behind an ingress, a load balancer or any front
//   b1000  proxy that keeps a few connections alive): 16 or 1,000 users' tokens, a different one
//          on each request, in a shuffled order; all valid, all in the gateway's cache once seen.
//   c      a new token every request: a pool walked once, never repeated (signature checks).
// Every target of a shape gets the same request bytes, token included; the baselines drop it unread.
import type { MeasuredTarget } from './interleave.js';
import { TokenFeed } from './token-feed.js';

export const SHAPE_NAMES = ['a', 'b16', 'b1000', 'c'] as const;
export type ShapeName = (typeof SHAPE_NAMES)[number];

export interface ShapeSpec {
  label: string;
  /** Distinct users' tokens rotating per request (shape b). */
  users?: number;
}

export const SHAPES: Record<ShapeName, ShapeSpec> = {
  a: { label: '(a) one client per connection' },
  b16: { label: '(b) 16 users per connection', users: 16 },
  b1000: { label: '(b) 1,000 users per connection', users: 1000 },
  c: { label: '(c) a new token every request' },
};

export interface ShapeTokens {
  /** Users' tokens of the shape b runs, by shape. */
  users: Partial<Record<ShapeName, readonly string[]>>;
  /** The pool of shape c. */
  pool: readonly string[];
}

/** The key of one target in one shape, as interleave and the results name it. */
export const shapeKey = (shape: ShapeName, target: string) => `${shape}/${target}`;

export function splitShapeKey(key: string): [ShapeName, string] {
  const at = key.indexOf('/');
  return [key.slice(0, at) as ShapeName, key.slice(at + 1)];
}

/**
 * Every target in every shape asked for, interleaved shape by shape. `targets` carry the
 * shape-a request (the one token in their headers); "direct" runs in shape a only, since the
 * upstream refuses any token but the gateway's credential.
 */
export function targetsByShape(shapes: readonly ShapeName[], targets: readonly MeasuredTarget[], tokens: ShapeTokens): MeasuredTarget[] {
  const measured: MeasuredTarget[] = [];
  for (const shape of shapes) {
    for (const target of targets) {
      if (target.name === 'direct' && shape !== 'a') continue;
      // A feed per target: each walks the shape-c pool from its start, so each sees only new tokens.
      const feed = shape === 'a' ? undefined : shape === 'c' ? new TokenFeed('once', tokens.pool) : new TokenFeed('rotate', tokens.users[shape]!);
      measured.push({ ...target, name: shapeKey(shape, target.name), ...(feed ? { tokens: feed } : {}) });
    }
  }
  return measured;
}
