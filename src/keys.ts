// Signing keys for tokens the gateway itself signs (built-in AS, `signed` upstream credential).
import { exportJWK, generateKeyPair, calculateJwkThumbprint, type JWK } from 'jose';

export async function generateSigningKey(): Promise<JWK> {
  const { privateKey } = await generateKeyPair('ES256', { extractable: true });
  const jwk = await exportJWK(privateKey);
  const kid = await calculateJwkThumbprint(jwk);
  return { ...jwk, kid, alg: 'ES256', use: 'sig' };
}
