// The gateway with authentication off, for the cost of auth: the same
// configuration, process and code as `mcp-auth-gateway serve` (routes, header
// policy, JSON-RPC validation, credential swap, proxy, metrics), except that
// no token is looked at: startGateway's benchmark-only principal stands in for
// every caller. Nothing in the product's configuration can do this.
//   node --import tsx bench/servers/gateway-auth-off.ts <config dir>
// BENCH_GATEWAY_MODULES=src runs the TypeScript sources instead of dist/.
import type * as GatewayModule from '../../src/gateway.js';
import type * as ConfigModule from '../../src/config/load.js';
import type { AuthContext } from '../../src/auth/principal.js';

const configDir = process.argv[2];
if (!configDir) throw new Error('usage: gateway-auth-off.ts <config dir>');
const modules = new URL(`../../${process.env.BENCH_GATEWAY_MODULES === 'src' ? 'src' : 'dist'}/`, import.meta.url);
const { startGateway } = (await import(new URL('gateway.js', modules).href)) as typeof GatewayModule;
const { loadConfig } = (await import(new URL('config/load.js', modules).href)) as typeof ConfigModule;

const config = await loadConfig(configDir);
const principal: AuthContext = Object.freeze({
  issuer: 'benchmark',
  subject: 'benchmark',
  clientId: 'benchmark',
  scopes: [...new Set(config.routes.flatMap((route) => route.requiredScopes))],
  expiresAt: Number.MAX_SAFE_INTEGER,
  claims: {},
  token: '',
  tokenHash: '',
});
const gateway = await startGateway(config, { benchmarkPrincipal: principal });
process.once('SIGTERM', () => {
  void gateway.close().then(() => process.exit(0));
});
