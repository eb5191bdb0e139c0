// How long this process's event loop was held at once, measured in CPU time
// rather than on the wall clock: a timer ticks as often as the loop lets it,
// and each tick reads the CPU the process used since the one before. Work
// that holds the loop (a request handled in one synchronous piece) shows up
// whole in one gap; a busy machine that does not schedule this process
// stretches the gaps' wall-clock time, not their CPU time. So a bound on it
// holds on a loaded CI machine and still fails on a loop-blocking regression.
export interface LoopBlocks {
  /** Stops watching: the largest CPU time (ms) between two ticks, all of it, and how many ticks there were. */
  stop(): { longestCpuMs: number; totalCpuMs: number; ticks: number };
}

export function watchLoopBlocks(): LoopBlocks {
  const start = process.cpuUsage();
  let last = start;
  let longest = 0;
  let ticks = 0;
  const tick = () => {
    const spent = process.cpuUsage(last);
    last = process.cpuUsage();
    longest = Math.max(longest, (spent.user + spent.system) / 1000);
    ticks++;
  };
  const timer = setInterval(tick, 1);
  return {
    stop() {
      clearInterval(timer);
      tick();
      const total = process.cpuUsage(start);
      return { longestCpuMs: longest, totalCpuMs: (total.user + total.system) / 1000, ticks };
    },
  };
}
