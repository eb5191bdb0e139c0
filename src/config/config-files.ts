// Which files make up a configuration, and the digest of what they hold: the
// loader hashes what it read (the live configuration's hash in /readyz), the
// watcher hashes what is on disk now to see whether anything changed.
import { createHash } from 'node:crypto';
import { readFile, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';

export const GATEWAY_FILES = ['gateway.yaml', 'gateway.yml'];

/** sha256 over each file's path and text, in the order they were added. */
export class ConfigDigest {
  private readonly hash = createHash('sha256');

  add(file: string, text: string): void {
    this.hash.update(`${file}\0${text.length}\0${text}\0`);
  }

  value(): string {
    return this.hash.digest('hex');
  }
}

/** Relative paths of the YAML files under `dir`, as the loader reads them. */
export async function yamlFilesUnder(dir: string, prefix = ''): Promise<string[]> {
  const found: string[] = [];
  for (const entry of await readdir(join(dir, prefix), { withFileTypes: true })) {
    // Hidden entries are skipped: Kubernetes mounts a ConfigMap as `..data/`
    // plus symlinks to it, and editors leave `.#file` and `.swp` behind.
    if (entry.name.startsWith('.')) continue;
    const rel = join(prefix, entry.name);
    // Symlinks to files are followed (that is how ConfigMaps appear); symlinks
    // to directories are not, so a link loop cannot hang the loader.
    const isFile = entry.isFile() || (entry.isSymbolicLink() && (await stat(join(dir, rel)).then((s) => s.isFile(), () => false)));
    if (entry.isDirectory()) {
      // A subdirectory with a gateway.yaml of its own is another configuration
      // (policies/examples/*), not more routes of this one.
      if (!(await holdsGatewayFile(join(dir, rel)))) found.push(...(await yamlFilesUnder(dir, rel)));
    } else if (isFile && /\.ya?ml$/.test(entry.name)) found.push(rel);
  }
  return found;
}

async function holdsGatewayFile(dir: string): Promise<boolean> {
  const names = await readdir(dir);
  return names.some((name) => GATEWAY_FILES.includes(name));
}

/**
 * The digest of what `source` holds on disk now (a missing or unreadable
 * source or file is part of the digest too), and the directories to watch.
 */
export async function snapshotConfig(source: string): Promise<{ digest: string; directories: string[] }> {
  const digest = new ConfigDigest();
  const info = await stat(source).catch(() => undefined);
  if (!info) {
    digest.add(source, '\0missing');
    return { digest: digest.value(), directories: [] };
  }
  const files = info.isDirectory() ? (await yamlFilesUnder(source).catch(() => [])).sort().map((f) => join(source, f)) : [source];
  for (const file of files) digest.add(file, await readFile(file, 'utf8').catch((err: NodeJS.ErrnoException) => `\0${err.code ?? 'unreadable'}`));
  return { digest: digest.value(), directories: info.isDirectory() ? await directoriesUnder(source) : [] };
}

/** `dir` and every real subdirectory under it (hidden ones too: a ConfigMap's `..data` swap happens in `dir`). */
async function directoriesUnder(dir: string): Promise<string[]> {
  const found = [dir];
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const entry of entries) if (entry.isDirectory()) found.push(...(await directoriesUnder(join(dir, entry.name))));
  return found;
}
