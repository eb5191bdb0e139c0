// The demo's configurations are embedded, not read from files, but validated by
// the same schema and resolver as files, so a mistake here fails as it would
// in policies/ (with the path of the setting).
import { resolveConfig } from '../config/resolve.js';
import { ConfigError, type ConfigIssue } from '../config/config-error.js';
import { GatewaySchema, RouteSchema } from '../config/schema.js';
import type { GatewayConfig } from '../config/types.js';
import { validate } from '../config/validate.js';
import type { Locate } from '../config/yaml-file.js';

/** `gateway` as gateway.yaml holds it, `routes` as one route file each; `env` fills in `{ env: … }` secrets. */
export async function resolveEmbeddedConfig(gatewayFile: unknown, routeFiles: unknown[], env: NodeJS.ProcessEnv): Promise<GatewayConfig> {
  const at: Locate = (path, message, key) => ({ file: 'demo', line: 0, column: 0, message: `${[...path, ...(key ? [key] : [])].join('.')}: ${message}` });
  const gateway = validate(GatewaySchema, gatewayFile, at);
  const routes = routeFiles.map((r) => validate(RouteSchema, r, at));
  const issues: ConfigIssue[] = [...gateway.issues, ...routes.flatMap((r) => r.issues)];
  if (!gateway.value || routes.some((r) => !r.value)) throw new ConfigError(issues);
  const resolved = await resolveConfig({
    source: 'demo',
    configDir: process.cwd(),
    gateway: { file: 'demo', value: gateway.value, at },
    routes: routes.map((r) => ({ file: 'demo', value: r.value!, at })),
    env,
  });
  if (resolved.issues.length > 0) throw new ConfigError(resolved.issues);
  return resolved.config;
}
