// Reload on change, whichever way the files change. The watch is on
// directories, never on a file: a file's watch follows its inode, which an
// edit that renames a new file over it (sed -i, vim, Ansible) or deletes and
// re-creates it leaves behind, and the watch then stops silently. An event in
// a watched directory (or the poll, for filesystems without events) compares
// the digest of the files on disk with the last one seen; only a change calls
// onChange, debounced, so an editor's write-rename-chmod is one reload.
import { watch, type FSWatcher } from 'node:fs';
import { realpath, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { snapshotConfig } from './config-files.js';

export interface WatchOptions {
  /** Quiet time after the last event before the files are compared. */
  debounceMs?: number;
  /** How often the files are compared without any event (NFS, some container mounts). */
  pollMs?: number;
}

export interface ConfigWatch {
  close(): void;
  /** Resolves once the first digest is taken (changes after it are seen). */
  ready: Promise<void>;
}

export function watchConfig(source: string, onChange: () => void, { debounceMs = 250, pollMs = 5_000 }: WatchOptions = {}): ConfigWatch {
  const watchers = new Map<string, FSWatcher>();
  let last: string | undefined;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  let comparing = Promise.resolve();

  const schedule = () => {
    clearTimeout(timer);
    if (!closed) timer = setTimeout(() => void compare(), debounceMs);
  };
  const compare = () =>
    (comparing = comparing
      .then(async () => {
        if (closed) return;
        const { digest, directories } = await snapshotConfig(source);
        follow(watchers, [...directories, ...(await fileDirectories(source))], schedule);
        if (last !== undefined && digest !== last) onChange();
        last = digest;
      })
      // A comparison that fails (a file vanishing mid-read) must not end the chain: the next event or poll compares again.
      .catch(() => undefined));

  const poll = setInterval(() => void compare(), pollMs);
  poll.unref();
  return {
    ready: compare(),
    close() {
      closed = true;
      clearTimeout(timer);
      clearInterval(poll);
      for (const watcher of watchers.values()) watcher.close();
      watchers.clear();
    },
  };
}

/** Watches exactly `directories`: new ones added, gone ones closed; a watcher that fails is dropped and retried at the next comparison. */
function follow(watchers: Map<string, FSWatcher>, directories: string[], onEvent: () => void): void {
  const wanted = new Set(directories);
  for (const [dir, watcher] of watchers) {
    if (wanted.has(dir)) continue;
    watcher.close();
    watchers.delete(dir);
  }
  for (const dir of wanted) {
    if (watchers.has(dir)) continue;
    try {
      const watcher = watch(dir, { persistent: false }, onEvent);
      watcher.on('error', () => {
        watcher.close();
        watchers.delete(dir);
        onEvent();
      });
      watchers.set(dir, watcher);
    } catch {
      // Gone already, or no watching on this filesystem: the poll still compares.
    }
  }
}

/** For a single-file source: its directory, and its target's when it is a symlink (a ConfigMap's `..data/gateway.yaml`). */
async function fileDirectories(source: string): Promise<string[]> {
  const info = await stat(source).catch(() => undefined);
  if (info?.isDirectory()) return [];
  const target = await realpath(source).catch(() => source);
  return [...new Set([dirname(source), dirname(target)])];
}
