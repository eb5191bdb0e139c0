// Reload on change: debounced, so an editor's write-rename-chmod sequence
// triggers one reload, not three.
import { watch, statSync, type FSWatcher } from 'node:fs';

export function watchConfig(source: string, onChange: () => void, debounceMs = 250): { close(): void } {
  let timer: NodeJS.Timeout | undefined;
  let watcher: FSWatcher | undefined;
  try {
    const recursive = statSync(source).isDirectory();
    watcher = watch(source, { recursive, persistent: false }, () => {
      clearTimeout(timer);
      timer = setTimeout(onChange, debounceMs);
    });
    watcher.on('error', () => undefined);
  } catch {
    // No watching (e.g. unsupported filesystem): SIGHUP still reloads.
  }
  return {
    close() {
      clearTimeout(timer);
      watcher?.close();
    },
  };
}
