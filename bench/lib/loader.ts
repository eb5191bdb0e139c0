// Which program loads the targets: wrk when it is installed (a C loader in its
// own process, cheap per request), autocannon in the harness otherwise. The
// choice and the loader's CPU share are reported with every result, since a
// loader that uses a whole core on a small machine is what limits the fastest targets.
import type { Runner } from './interleave.js';
import { runLoad, type LoadSettings } from './load.js';
import { findWrk, runWrk, wrkSeconds } from './wrk.js';
import { packageVersion } from './machine.js';

export type LoaderChoice = 'auto' | 'wrk' | 'autocannon';

export interface LoaderInfo {
  name: 'wrk' | 'autocannon';
  version: string;
  /** wrk's threads (autocannon runs on the harness's one thread). */
  threads: number;
  /** Why this loader, when it is not the one asked for. */
  note?: string;
}

export interface Loader extends LoaderInfo {
  run: Runner<LoadSettings>;
  /** The seconds a run of `durationSec` actually lasts (wrk runs whole seconds). */
  seconds(durationSec: number): number;
}

/** A loader run's CPU above this share of one core: the loader, not the target, may have been the limit. */
export const LOADER_LIMIT_PCT = 90;

export function chooseLoader(choice: LoaderChoice, threads: number): Loader {
  const wrk = choice === 'autocannon' ? undefined : findWrk();
  if (choice === 'wrk' && !wrk) throw new Error('--loader wrk: wrk is not installed (Debian: apt-get install wrk)');
  if (wrk) {
    return {
      name: 'wrk',
      version: wrk.version,
      threads,
      run: (target, settings) => runWrk(wrk, target, settings, threads),
      seconds: wrkSeconds,
    };
  }
  return {
    name: 'autocannon',
    version: packageVersion('node_modules/autocannon/'),
    threads: 1,
    ...(choice === 'auto' ? { note: 'wrk is not installed, so autocannon loaded the targets from the harness process, on the cores it measures (Debian: apt-get install wrk).' } : {}),
    run: runLoad,
    seconds: (durationSec) => durationSec,
  };
}
