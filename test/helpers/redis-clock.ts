/**
 * A redis-server whose clock a test moves forward, for what lasts minutes of the store's time (a DPoP
 * replay marker's whole life) without waiting them out. clock-shift.c, preloaded into the server,
 * adds an offset the test sets to every read of its wall clock, so Redis's TIME and its key expiry
 * jump together. In-process replicas are given clocks moved by the same offset
 * (StartOptions.wallClock and monotonicClock), so their reading of the store's clock
 * (store/store-clock.ts) moves with it. The shim is compiled with the machine's cc, once per source.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, existsSync, openSync, writeSync } from 'node:fs';
import { mkdtemp, readFile, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startRedisServer, type RedisServer } from './redis-server.js';

const SHIM_SOURCE = join(import.meta.dirname, 'clock-shift.c');

/** The compiled shim, in the temporary directory under a hash of its source (shared by runs and files). */
async function shimLibrary(): Promise<string> {
  const source = await readFile(SHIM_SOURCE);
  const library = join(tmpdir(), `mag-clock-shift-${createHash('sha256').update(source).digest('hex').slice(0, 16)}.so`);
  if (existsSync(library)) return library;
  const staging = `${library}.${process.pid}`;
  await promisify(execFile)('cc', ['-shared', '-fPIC', '-O2', '-Wall', '-Werror', '-o', staging, SHIM_SOURCE]);
  await rename(staging, library);
  return library;
}

export interface RedisWithClock {
  server: RedisServer;
  /** How far the server's wall clock is ahead of the real one, in ms. */
  shiftMs(): number;
  /** Moves the server's clock, and the replicas' clocks below, `seconds` forward; in effect at the server's next clock read. */
  advance(seconds: number): void;
  /** A replica's wall clock, `offsetMs` from the real one and moved with the server's. */
  wallClock(offsetMs: number): () => number;
  /** A replica's monotonic clock, moved with the server's. */
  monotonicClock(): () => number;
  /** Stops the server and removes the shift file. */
  stop(): Promise<void>;
}

/**
 * The file clock-shift.c maps: a sequence number at 0 (odd while writing), the offset in ms at 8.
 * Written synchronously: the server, which waits for an even number, waits microseconds.
 */
function shiftWriter(file: string): { write(offsetMs: number): void; close(): void } {
  const fd = openSync(file, 'w+');
  writeSync(fd, Buffer.alloc(16), 0, 16, 0);
  let seq = 0;
  const writeSeq = () => {
    const bytes = Buffer.alloc(4);
    bytes.writeUInt32LE(++seq);
    writeSync(fd, bytes, 0, 4, 0);
  };
  return {
    write(offsetMs) {
      const offset = Buffer.alloc(8);
      offset.writeBigInt64LE(BigInt(offsetMs));
      writeSeq();
      writeSync(fd, offset, 0, 8, 8);
      writeSeq();
    },
    close: () => closeSync(fd),
  };
}

export async function startRedisWithClock(): Promise<RedisWithClock> {
  const library = await shimLibrary();
  const dir = await mkdtemp(join(tmpdir(), 'mag-redis-clock-'));
  const file = join(dir, 'shift');
  const writer = shiftWriter(file);
  let shift = 0;
  const server = await startRedisServer([], { LD_PRELOAD: library, CLOCK_SHIFT_FILE: file });
  return {
    server,
    shiftMs: () => shift,
    advance(seconds) {
      if (!(seconds >= 0)) throw new Error(`the clock moves forward only, not by ${seconds} s`);
      writer.write(shift + seconds * 1000);
      shift += seconds * 1000;
    },
    wallClock: (offsetMs) => () => Date.now() + offsetMs + shift,
    monotonicClock: () => () => performance.now() + shift,
    async stop() {
      await server.stop();
      writer.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
