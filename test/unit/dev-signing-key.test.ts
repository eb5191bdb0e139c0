/**
 * The dev signing key that cannot be written (EACCES on a container's read-only root) names the
 * setting that replaces it, `authorization_server.signing_key`.
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it, vi } from 'vitest';
import { loadSigningKeys, SigningKeyError } from '../../src/authorization-server/keys/signing-keys.js';

// The test may run as root, which no file mode stops: the refusal is made here instead.
vi.mock('node:fs/promises', async (importOriginal) => ({
  ...(await importOriginal<typeof import('node:fs/promises')>()),
  mkdir: (path: string) => Promise.reject(Object.assign(new Error(`EACCES: permission denied, mkdir '${path}'`), { code: 'EACCES' })),
}));

it('a dev key that cannot be written says to set authorization_server.signing_key', async () => {
  const loading = loadSigningKeys({ publicUrl: 'http://127.0.0.1:8080', devKeyDirectory: join(tmpdir(), 'mag-never', '.dev-keys') });
  await expect(loading).rejects.toThrow(SigningKeyError);
  await expect(loading).rejects.toThrow(/cannot write the dev signing key .*EACCES.*set `authorization_server\.signing_key`/);
});
