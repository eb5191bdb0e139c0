/**
 * The configuration watch follows every way a file changes, each made with
 * real file operations: written in place, renamed over (sed -i, as vim and
 * Ansible do), deleted and re-created, a Kubernetes ConfigMap's `..data`
 * symlink swap, a new file or subdirectory in the directory; for a single
 * file source too. The poll is set to an hour so only the directory events
 * can see the change; a property test runs random sequences of these edits and
 * requires every one to be seen, each edit after another rename included (the
 * watch that used to stop after the first rename).
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rename, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { watchConfig, type ConfigWatch } from '../../src/config/watch.js';

const run = promisify(execFile);
const HOUR = 3_600_000;

let dir: string;
let watch: ConfigWatch | undefined;
let changes = 0;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mag-watch-'));
  changes = 0;
});
afterEach(async () => {
  watch?.close();
  watch = undefined;
  await rm(dir, { recursive: true, force: true });
});

async function start(source: string, pollMs = HOUR): Promise<void> {
  watch = watchConfig(source, () => changes++, { debounceMs: 20, pollMs });
  await watch.ready;
}

/** Waits until the change count passes `seen` (the watch saw the edit). */
async function seen(before: number, what: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (changes <= before) {
    if (Date.now() > deadline) throw new Error(`the watch did not see: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

type Edit = (file: string, text: string) => Promise<void>;
const EDITS: Record<string, Edit> = {
  'write in place': (file, text) => writeFile(file, text),
  'sed -i (rename over)': async (file, text) => {
    await run('sed', ['-i', `1c ${text}`, file]);
  },
  'editor save (write a new file, rename it over)': async (file, text) => {
    await writeFile(`${file}.tmp~`, text);
    await rename(`${file}.tmp~`, file);
  },
  'delete and re-create': async (file, text) => {
    await unlink(file);
    await new Promise((r) => setTimeout(r, 30));
    await writeFile(file, text);
  },
};

describe('watching a configuration directory', () => {
  for (const [name, edit] of Object.entries(EDITS)) {
    it(`sees ${name}, and every edit after it`, async () => {
      const file = join(dir, 'route.yaml');
      await writeFile(join(dir, 'gateway.yaml'), 'listen: {}\n');
      await writeFile(file, 'path: /a/mcp\n');
      await start(dir);
      for (const [i, next] of [edit, EDITS['write in place']!, edit].entries()) {
        const before = changes;
        await next(file, `path: /edit-${i}/mcp`);
        await seen(before, `${name}, edit ${i}`);
      }
    });
  }

  it('sees a new file, and a new subdirectory with a file in it', async () => {
    await writeFile(join(dir, 'gateway.yaml'), 'listen: {}\n');
    await start(dir);
    let before = changes;
    await writeFile(join(dir, 'new.yaml'), 'path: /new/mcp\n');
    await seen(before, 'a new file');
    before = changes;
    await mkdir(join(dir, 'team'));
    await new Promise((r) => setTimeout(r, 100));
    await writeFile(join(dir, 'team', 'route.yaml'), 'path: /team/mcp\n');
    await seen(before, 'a file in a new subdirectory');
    before = changes;
    await writeFile(join(dir, 'team', 'route.yaml'), 'path: /team2/mcp\n');
    await seen(before, 'an edit in the new subdirectory');
  });

  it("sees a Kubernetes ConfigMap's ..data symlink swap, again and again", async () => {
    // The kubelet's layout: ..<timestamp>/ holds the files, ..data links to it,
    // each file is a link through ..data; an update writes a new ..<timestamp>/
    // and renames a new link over ..data.
    const generation = async (n: number) => {
      const version = join(dir, `..2026_11_29_00_00_0${n}.000`);
      await mkdir(version);
      await writeFile(join(version, 'gateway.yaml'), `listen: {}\n# generation ${n}\n`);
      await symlink(`..2026_11_29_00_00_0${n}.000`, join(dir, '..data_tmp'));
      await rename(join(dir, '..data_tmp'), join(dir, '..data'));
    };
    await generation(0);
    await symlink('..data/gateway.yaml', join(dir, 'gateway.yaml'));
    await start(dir);
    for (const n of [1, 2, 3]) {
      const before = changes;
      await generation(n);
      await seen(before, `ConfigMap generation ${n}`);
    }
  });

  it('calls nothing when the files are touched but unchanged, or an unrelated hidden file changes', async () => {
    await writeFile(join(dir, 'gateway.yaml'), 'listen: {}\n');
    await start(dir);
    await run('touch', [join(dir, 'gateway.yaml')]);
    await writeFile(join(dir, '.gateway.yaml.swp'), 'editor state');
    await new Promise((r) => setTimeout(r, 300));
    expect(changes).toBe(0);
  });

  it('sees what the events missed at the next poll', async () => {
    await writeFile(join(dir, 'gateway.yaml'), 'listen: {}\n');
    await start(dir, 100);
    watch!.close(); // no more events…
    watch = watchConfig(dir, () => changes++, { debounceMs: HOUR, pollMs: 50 }); // …and none acted on in time
    await watch.ready;
    const before = changes;
    await writeFile(join(dir, 'gateway.yaml'), 'listen: { port: 1 }\n');
    await seen(before, 'the poll');
  });
});

describe('watching a single configuration file', () => {
  for (const [name, edit] of Object.entries(EDITS)) {
    it(`sees ${name}, and every edit after it`, async () => {
      const file = join(dir, 'gateway.yaml');
      await writeFile(file, 'listen: {}\n');
      await start(file);
      for (const [i, next] of [edit, edit, EDITS['write in place']!].entries()) {
        const before = changes;
        await next(file, `# edit ${i}`);
        await seen(before, `${name}, edit ${i}`);
      }
    });
  }
});

describe('property: every edit of a random sequence is seen', () => {
  it('holds for sequences of in-place writes, renames over and re-creations', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.constantFrom(...Object.keys(EDITS)), { minLength: 2, maxLength: 5 }), fc.boolean(), async (sequence, single) => {
        const root = await mkdtemp(join(tmpdir(), 'mag-watch-prop-'));
        const file = join(root, 'gateway.yaml');
        await writeFile(file, 'listen: {}\n');
        let count = 0;
        const w = watchConfig(single ? file : root, () => count++, { debounceMs: 20, pollMs: HOUR });
        try {
          await w.ready;
          for (const [i, name] of sequence.entries()) {
            const before = count;
            await EDITS[name]!(file, `# ${i} ${name}`);
            const deadline = Date.now() + 5_000;
            while (count <= before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
            expect(count, `${name} (step ${i} of ${sequence.join(', ')})`).toBeGreaterThan(before);
          }
        } finally {
          w.close();
          await rm(root, { recursive: true, force: true });
        }
      }),
      { numRuns: 8 },
    );
  });
});
