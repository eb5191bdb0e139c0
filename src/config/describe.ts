// What `check` prints: one line per route, then the warnings.
import type { GatewayConfig, RouteConfig } from './types.js';
import { redactUrl } from './urls.js';

export function describeRoutes(config: GatewayConfig): string {
  const lines = [`${config.source}: ${config.routes.length} route${config.routes.length === 1 ? '' : 's'}, public_url ${config.publicUrl}`];
  for (const r of config.routes) {
    const scopes = r.requiredScopes.length > 0 ? r.requiredScopes.join(' ') : '(none)';
    lines.push(
      `  ${r.path} → ${redactUrl(r.upstream)}  resource=${r.resource} token=${r.token.kind} required_scopes=${scopes} rules=${r.rules.length} upstream_auth=${r.upstreamAuth.kind}${describeIsolation(r)}`,
    );
  }
  lines.push(describeTraces(config));
  for (const w of config.warnings) lines.push(`warning: ${w}`);
  return lines.join('\n');
}

/** A stdio route's isolation, so an operator sees at a glance which servers run unconfined. */
function describeIsolation({ stdio }: RouteConfig): string {
  if (!stdio) return '';
  const sandbox = stdio.sandbox ? `bubblewrap${stdio.sandbox.network ? '' : ' (no network)'}` : 'none';
  return ` sandbox=${sandbox} user=${stdio.user ? `${stdio.user.uid}:${stdio.user.gid}` : "the gateway's"}`;
}

/** The export target and sampling; never the export headers (they may hold the collector's credential). */
function describeTraces({ traces }: GatewayConfig): string {
  if (!traces) return '  traces: off (no telemetry.traces.otlp_endpoint nor OTEL_EXPORTER_OTLP_ENDPOINT)';
  const sampler = `${traces.parentBased ? 'parent-based, ' : ''}sample_ratio=${traces.sampleRatio}`;
  const headers = Object.keys(traces.headers);
  return `  traces → ${redactUrl(traces.url)} (${traces.protocol}, ${sampler}, service.name=${traces.serviceName}${headers.length ? `, headers: ${headers.join(' ')}` : ''})`;
}
