// Secrets are never inline: `{ env: NAME }` or `{ file: path }`. Resolved once
// at load so a missing secret stops start-up instead of failing a request.
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { SecretRefValue } from './schema.js';

/** The secret's value; throws an Error whose message says what is missing. */
export async function readSecret(ref: SecretRefValue, configDir: string, env: NodeJS.ProcessEnv): Promise<string> {
  if ('env' in ref) {
    const value = env[ref.env];
    if (!value) throw new Error(`environment variable ${ref.env} is not set or empty`);
    return value;
  }
  const path = resolve(configDir, ref.file);
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new Error(`cannot read secret file ${ref.file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  // Editors and `echo` add one newline; anything else is part of the secret.
  const value = text.replace(/\r?\n$/, '');
  if (value === '') throw new Error(`secret file ${ref.file} is empty`);
  return value;
}
