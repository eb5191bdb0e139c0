// ioredis gives a connection up for good ('end') when its connector fails
// rather than its socket: a Sentinel's +switch-master (failoverDetector)
// arriving while the client is still asking a Sentinel for the primary makes
// that lookup reject, and the client then never reconnects. A store has no
// one to reconnect it by hand, so it starts again after a pause, until closed.
import type { Redis } from 'ioredis';

export interface Revival {
  /** Stop reviving (the store is closing): an 'end' after this is final. */
  stop(): void;
}

export function reviveWhenEnded(client: Redis, pauseMs: number): Revival {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const onEnd = () => {
    if (stopped || timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      // connect() rejects when this attempt fails; the client's own retry strategy then takes over.
      if (!stopped && client.status === 'end') client.connect().catch(() => {});
    }, pauseMs);
    timer.unref();
  };
  client.on('end', onEnd);
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
      client.off('end', onEnd);
    },
  };
}
