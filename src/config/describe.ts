// What `check` prints: one line per route, then the warnings.
import type { GatewayConfig } from './types.js';
import { redactUrl } from './urls.js';

export function describeRoutes(config: GatewayConfig): string {
  const lines = [`${config.source}: ${config.routes.length} route${config.routes.length === 1 ? '' : 's'}, public_url ${config.publicUrl}`];
  for (const r of config.routes) {
    const scopes = r.requiredScopes.length > 0 ? r.requiredScopes.join(' ') : '(none)';
    lines.push(
      `  ${r.path} → ${redactUrl(r.upstream)}  resource=${r.resource} token=${r.token.kind} required_scopes=${scopes} rules=${r.rules.length} upstream_auth=${r.upstreamAuth.kind}`,
    );
  }
  for (const w of config.warnings) lines.push(`warning: ${w}`);
  return lines.join('\n');
}
