// Not a product: the gateway's build run as N node:cluster workers sharing one
// listening socket, to measure whether a second process on the same machine
// pays (docs/benchmark.md, "Several processes"). Run it as a gateway entry of
// bench:compare, with the arguments of `mcp-auth-gateway`:
//   npm run bench:compare -- bin/mcp-auth-gateway.js 'node --import tsx::bench/servers/cluster-gateway.ts'
// Each worker is a whole gateway with its own memory store, caches and
// metrics: nothing is shared but the port (port 0 included: the primary binds
// it once and hands the same socket to every worker). BENCH_WORKERS (default 2)
// is passed on from the harness's environment; the workers run the build's
// bin/mcp-auth-gateway.js. Their CPU counts: the harness adds a target's
// direct children to its own.
import cluster from 'node:cluster';
import { resolve } from 'node:path';

const workers = Number(process.env.BENCH_WORKERS ?? 2);
cluster.setupPrimary({
  exec: resolve('bin/mcp-auth-gateway.js'),
  args: process.argv.slice(2),
  // The workers run the JavaScript build: no tsx loader.
  execArgv: [],
});
for (let i = 0; i < workers; i++) cluster.fork();
cluster.on('exit', (worker, code) => {
  if (!stopping) console.error(`worker ${worker.id} exited with ${code}`);
});
let stopping = false;
process.on('SIGTERM', () => {
  stopping = true;
  for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGTERM');
  cluster.disconnect(() => process.exit(0));
});
