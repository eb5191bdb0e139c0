// How an aggregated route shows its upstreams' tool and prompt names, both
// ways: an upstream's own name → the shown name, and a shown name → which
// upstream and which of its names. A rename wins over the pattern. The checks
// of config/upstreams.ts make the reverse unambiguous.
import type { AggregateConfig } from './types.js';

/** The characters MCP allows in a tool name (2025-11-25 §tools: A–Z a–z 0–9 _ - .). */
export const TOOL_NAME_CHARS = /^[A-Za-z0-9_.-]+$/;

export interface ShownNameOwner {
  upstream: string;
  name: string;
}

/** The literal text before and after {name}, for one upstream. */
export function patternParts(pattern: string, upstream: string): { before: string; after: string } {
  const [before = '', after = ''] = pattern.replace('{upstream}', upstream).split('{name}');
  return { before, after };
}

export class ShownNames {
  private readonly byShown = new Map<string, ShownNameOwner>();
  private readonly parts: { upstream: string; before: string; after: string; renames: Record<string, string> }[];

  constructor(aggregate: AggregateConfig) {
    this.parts = aggregate.upstreams.map((u) => ({ upstream: u.name, ...patternParts(aggregate.pattern, u.name), renames: u.renames }));
    for (const u of aggregate.upstreams) for (const [name, shown] of Object.entries(u.renames)) this.byShown.set(shown, { upstream: u.name, name });
  }

  /** The name a client is shown for `name` of `upstream`. */
  shown(upstream: string, name: string): string {
    const p = this.parts.find((x) => x.upstream === upstream);
    if (p === undefined) throw new Error(`unknown upstream ${upstream}`);
    return Object.hasOwn(p.renames, name) ? p.renames[name]! : p.before + name + p.after;
  }

  /** Whose name a shown name is; undefined: no upstream's (or a renamed name's pattern form, which is not shown). */
  owner(shown: string): ShownNameOwner | undefined {
    const renamed = this.byShown.get(shown);
    if (renamed) return renamed;
    for (const p of this.parts) {
      if (shown.length <= p.before.length + p.after.length || !shown.startsWith(p.before) || !shown.endsWith(p.after)) continue;
      const name = shown.slice(p.before.length, shown.length - p.after.length);
      return Object.hasOwn(p.renames, name) ? undefined : { upstream: p.upstream, name };
    }
    return undefined;
  }
}
