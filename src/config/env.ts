// Environment overrides (PORT, HOST, PUBLIC_URL, LOG_LEVEL, REDIS_URL): they
// win over gateway.yaml, so one image serves many deployments. Each value is
// checked on its own and reported as `env:NAME`; a bad one is not applied.
import type { z } from 'zod';
import { GatewaySchema, StoreSchema } from './schema.js';
import type { ConfigIssue } from './config-error.js';

const LOG_LEVELS: readonly string[] = GatewaySchema.shape.log_level.unwrap().options;

export interface EnvOverrides {
  port?: number;
  host?: string;
  publicUrl?: string;
  logLevel?: string;
  redisUrl?: string;
}

export function readEnvOverrides(env: NodeJS.ProcessEnv): { overrides: EnvOverrides; issues: ConfigIssue[] } {
  const overrides: EnvOverrides = {};
  const issues: ConfigIssue[] = [];
  // Empty counts as unset, as with `PORT=` in a compose file.
  const read = (name: string, check: (value: string) => string | undefined, apply: (value: string) => void) => {
    const value = env[name];
    if (!value) return;
    const message = check(value);
    if (message) issues.push({ file: `env:${name}`, line: 0, column: 0, message });
    else apply(value);
  };
  read('PORT', (v) => (/^[0-9]{1,5}$/.test(v) && Number(v) <= 65535 ? undefined : 'expected a port number from 0 to 65535'), (v) => (overrides.port = Number(v)));
  read('HOST', (v) => (/^\S+$/.test(v) ? undefined : 'expected a host name or address'), (v) => (overrides.host = v));
  read('PUBLIC_URL', (v) => problem(GatewaySchema.shape.public_url, v), (v) => (overrides.publicUrl = v));
  read('LOG_LEVEL', (v) => (LOG_LEVELS.includes(v) ? undefined : `expected one of ${LOG_LEVELS.join(', ')}`), (v) => (overrides.logLevel = v));
  read('REDIS_URL', (v) => problem(StoreSchema, { kind: 'redis', url: v }), (v) => (overrides.redisUrl = v));
  return { overrides, issues };
}

/**
 * For a missing gateway.yaml key: how else to give it. The shipped configs leave
 * public_url to their Deployment's (or `docker run`'s) PUBLIC_URL, so `check` run
 * on them by hand needs it too.
 */
export function howToGiveByEnv(path: readonly PropertyKey[]): string | undefined {
  if (path.length !== 1 || path[0] !== 'public_url') return undefined;
  return 'write it here, or set the PUBLIC_URL environment variable as the shipped Deployments and docker run example do (give it to check too)';
}

/** The gateway.yaml data with the overrides put in, before validation (so PUBLIC_URL can stand in for a missing public_url). */
export function applyEnvOverrides(data: unknown, o: EnvOverrides): unknown {
  if (!isRecord(data)) return data;
  const out: Record<string, unknown> = { ...data };
  // A listen that is not a mapping stays as written, for validation to report.
  if ((o.port !== undefined || o.host !== undefined) && (out.listen === undefined || isRecord(out.listen))) {
    out.listen = { ...out.listen, ...(o.port !== undefined && { port: o.port }), ...(o.host !== undefined && { host: o.host }) };
  }
  if (o.publicUrl !== undefined) out.public_url = o.publicUrl;
  if (o.logLevel !== undefined) out.log_level = o.logLevel;
  if (o.redisUrl !== undefined) {
    // Keep key_prefix and command_timeout when the file already chose redis.
    out.store = isRecord(out.store) && out.store.kind === 'redis' ? { ...out.store, url: o.redisUrl } : { kind: 'redis', url: o.redisUrl };
  }
  return out;
}

function problem(schema: z.ZodType, value: unknown): string | undefined {
  const result = schema.safeParse(value);
  return result.success ? undefined : (result.error.issues[0]?.message ?? 'invalid value');
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
