// What verifying a token the gateway has never seen costs: the gateway's JWT
// verifier (signature with node:crypto) against jose's jwtVerify (WebCrypto)
// with the same options and key set, in interleaved rounds of the same
// process, one verification at a time, each token new. CPU µs per
// verification (process.cpuUsage) is the figure to read on a shared machine.
// Run: npx tsx bench/jwt-verify.ts [tokens per round] [rounds] [alg]
import { createLocalJWKSet, exportJWK, generateKeyPair, jwtVerify, SignJWT } from 'jose';
import { createLocalJwtVerifier } from '../src/auth/jwt-verifier.js';

const PER_ROUND = Number(process.argv[2] ?? 2000);
const ROUNDS = Number(process.argv[3] ?? 5);
const ALG = process.argv[4] ?? 'ES256';
const ISSUER = 'https://idp.example';
const AUDIENCE = 'https://gw.example/mcp';

const { privateKey, publicKey } = await generateKeyPair(ALG);
const keySet = createLocalJWKSet({ keys: [{ ...(await exportJWK(publicKey)), kid: 'k1', alg: ALG, use: 'sig' }] });
const mint = (i: number) =>
  new SignJWT({ sub: `user-${i}`, client_id: 'c', scope: 'mcp:read' })
    .setProtectedHeader({ alg: ALG, kid: 'k1' })
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setIssuedAt()
    .setExpirationTime('1h')
    .sign(privateKey);

const gateway = createLocalJwtVerifier({ issuer: ISSUER, audience: AUDIENCE, getKeySet: () => keySet, algorithms: [ALG], clockSkewSeconds: 30 });
const options = { issuer: ISSUER, audience: AUDIENCE, algorithms: [ALG], clockTolerance: 30, requiredClaims: ['exp', 'iss', 'aud', 'sub'] };
const candidates: Record<string, (token: string) => Promise<unknown>> = {
  'gateway (node:crypto)': (token) => gateway.verify(token),
  'jose jwtVerify (WebCrypto)': (token) => jwtVerify(token, keySet, options),
};

const results = new Map<string, { cpuUs: number[]; opsPerSec: number[] }>();
let serial = 0;
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, verify] of Object.entries(candidates)) {
    const tokens = await Promise.all(Array.from({ length: PER_ROUND }, () => mint(serial++)));
    const startCpu = process.cpuUsage();
    const start = process.hrtime.bigint();
    for (const token of tokens) await verify(token);
    const wallSec = Number(process.hrtime.bigint() - start) / 1e9;
    const cpu = process.cpuUsage(startCpu);
    const entry = results.get(name) ?? { cpuUs: [], opsPerSec: [] };
    entry.cpuUs.push((cpu.user + cpu.system) / PER_ROUND);
    entry.opsPerSec.push(PER_ROUND / wallSec);
    results.set(name, entry);
  }
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1]!;
const range = (values: number[]) => `${Math.min(...values).toFixed(1)}–${Math.max(...values).toFixed(1)}`;
console.log(`${ALG}, ${ROUNDS} interleaved rounds × ${PER_ROUND} new tokens, node ${process.version}`);
for (const [name, { cpuUs, opsPerSec }] of results) {
  console.log(`${name}: CPU µs/verification ${median(cpuUs).toFixed(1)} (${range(cpuUs)}), verifications/s ${median(opsPerSec).toFixed(0)} (${range(opsPerSec)})`);
}
const [ours, theirs] = [...results.values()];
const ratios = ours!.cpuUs.map((cpu, i) => cpu / theirs!.cpuUs[i]!);
console.log(`CPU ratio gateway/jose per round: median ${median(ratios).toFixed(2)} (${range(ratios.map((r) => r * 100)).replaceAll('.0', '')} %)`);
