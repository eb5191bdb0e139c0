// Forwarders that hold state worth keeping across reloads: a stdio route's
// processes are its clients' sessions, so a reload that leaves the route as it
// was (same path, same stdio settings and limits) must not stop them. Each
// route table acquires its forwarder here; the forwarder closes (its processes
// stop) when the last table holding it is closed, that is when a reload drops
// or changes the route, or at shutdown.
import type { Forwarder } from '../proxy/forwarder.js';

interface Entry {
  forwarder: Forwarder;
  holders: number;
}

export class SharedForwarders {
  private readonly entries = new Map<string, Entry>();

  /** The forwarder for `key`, created once; the handle's close() releases this table's hold (once). */
  acquire(key: string, create: () => Forwarder): Forwarder {
    let entry = this.entries.get(key);
    if (!entry) this.entries.set(key, (entry = { forwarder: create(), holders: 0 }));
    entry.holders++;
    const held = entry;
    let released = false;
    return {
      forward: (req, res, ctx) => held.forwarder.forward(req, res, ctx),
      close: async () => {
        if (released) return;
        released = true;
        if (--held.holders > 0) return;
        if (this.entries.get(key) === held) this.entries.delete(key);
        await held.forwarder.close();
      },
    };
  }
}
