// What a DPoP proof check costs per request, against a Bearer token, in the
// same run: the gateway's own authentication step (authenticate() over the
// cached verifier, as a protected route calls it) on one kept-alive
// connection, Bearer and DPoP rounds interleaved. The proofs (ES256, as MCP
// clients would make them) are signed before timing: a client's cost, not the
// gateway's. The store is the memory store, so Redis's round trip for the
// `jti` claim is not in the figure (add one store call per request with Redis).
// Run: npx tsx bench/dpop-check.ts [requests per round] [rounds]
import { randomUUID } from 'node:crypto';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT } from 'jose';
import { authenticate } from '../src/auth/authenticate.js';
import { spendDpopProof } from '../src/auth/dpop-binding.js';
import { createTokenVerifier } from '../src/auth/create-token-verifier.js';
import { dpopProofClaimer } from '../src/auth/dpop-replay.js';
import { proofJtiTtlMs } from '../src/auth/dpop-proof.js';
import { sha256Base64Url } from '../src/auth/hash.js';
import { JwksRegistry } from '../src/auth/jwks.js';
import { createLocalJwtVerifier } from '../src/auth/jwt-verifier.js';
import type { RouteConfig } from '../src/config/types.js';
import { MemoryStore } from '../src/store/memory-store.js';

const PER_ROUND = Number(process.argv[2] ?? 2000);
const ROUNDS = Number(process.argv[3] ?? 5);
const ISSUER = 'https://gw.example';
const HTU = 'https://gw.example/mcp';

const route = {
  file: 'bench',
  path: '/mcp',
  resource: HTU,
  resourceMetadataUrl: 'https://gw.example/.well-known/oauth-protected-resource/mcp',
  token: { kind: 'builtin' },
  dpop: { required: false, htu: HTU },
  requiredScopes: ['mcp:read'],
} as unknown as RouteConfig;

const issuerKeys = await generateKeyPair('ES256');
const clientKeys = await generateKeyPair('ES256', { extractable: true });
const clientJwk = await exportJWK(clientKeys.publicKey);
const jkt = await calculateJwkThumbprint(clientJwk, 'sha256');
const mint = (claims: Record<string, unknown>) =>
  new SignJWT({ sub: 'alice', client_id: 'c', scope: 'mcp:read', ...claims })
    .setProtectedHeader({ alg: 'ES256', typ: 'at+jwt' })
    .setIssuer(ISSUER)
    .setAudience(HTU)
    .setIssuedAt()
    .setExpirationTime('1h')
    .sign(issuerKeys.privateKey);
const bearerToken = await mint({});
const boundToken = await mint({ cnf: { jkt } });

const verifier = createTokenVerifier(route, {
  jwksSources: new JwksRegistry(),
  builtin: () => createLocalJwtVerifier({ issuer: ISSUER, audience: HTU, getKeySet: () => issuerKeys.publicKey, algorithms: ['ES256'] }),
});
const store = new MemoryStore({ maxEntries: 1_000_000 });
const nowSeconds = () => Math.floor(Date.now() / 1000);
const checks = { nowSeconds, claim: dpopProofClaimer(store, { share: Number.MAX_SAFE_INTEGER, markerTtlMs: proofJtiTtlMs(30_000), nowSeconds }) };

async function proofs(n: number): Promise<string[]> {
  const ath = sha256Base64Url(boundToken);
  return Promise.all(
    Array.from({ length: n }, () =>
      new SignJWT({ jti: randomUUID(), iat: Math.floor(Date.now() / 1000), htm: 'POST', htu: HTU, ath })
        .setProtectedHeader({ typ: 'dpop+jwt', alg: 'ES256', jwk: clientJwk })
        .sign(clientKeys.privateKey),
    ),
  );
}

/** CPU µs per request of `n` authentications on one connection (the keep-alive case). */
async function measure(kind: 'bearer' | 'dpop', n: number): Promise<number> {
  const socket = {};
  const signed = kind === 'dpop' ? await proofs(n) : [];
  const header = kind === 'dpop' ? `DPoP ${boundToken}` : `Bearer ${bearerToken}`;
  const start = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    const rawHeaders = kind === 'dpop' ? ['Authorization', header, 'DPoP', signed[i]!] : ['Authorization', header];
    const authenticated = authenticate(route, verifier, { rawHeaders, socket, method: 'POST' }, '', checks);
    const auth = authenticated instanceof Promise ? await authenticated : authenticated;
    // As the route does once the request is admitted.
    await spendDpopProof(checks, auth);
  }
  const used = process.cpuUsage(start);
  return (used.user + used.system) / n;
}

await measure('bearer', 200);
await measure('dpop', 200);
const results: Record<'bearer' | 'dpop', number[]> = { bearer: [], dpop: [] };
for (let round = 0; round < ROUNDS; round++) {
  results.bearer.push(await measure('bearer', PER_ROUND));
  results.dpop.push(await measure('dpop', PER_ROUND));
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const fmt = (xs: number[]) => `median ${median(xs).toFixed(1)} µs (rounds: ${xs.map((x) => x.toFixed(1)).join(', ')})`;
console.log(`authenticate() CPU per request, ${ROUNDS} interleaved rounds × ${PER_ROUND} requests, node ${process.version}`);
console.log(`  Bearer (recalled on the connection): ${fmt(results.bearer)}`);
console.log(`  DPoP (recalled token + ES256 proof check + jti claim, memory store): ${fmt(results.dpop)}`);
console.log(`  a DPoP proof check costs ${(median(results.dpop) - median(results.bearer)).toFixed(1)} µs of CPU per request more`);
await store.close();
