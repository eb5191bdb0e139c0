// Entry point: serve | check | keys generate. Exit codes: 0 ok, 1 invalid
// configuration, failed start or a failed online check, 2 usage.
import { upstreamRoutes } from './config/upstreams.js';
import { parseArgs } from 'node:util';
import { loadConfig } from './config/load.js';
import { ConfigError } from './config/config-error.js';
import type { GatewayConfig } from './config/types.js';
import { describeRoutes } from './config/describe.js';
import { sandboxIssues } from './proxy/stdio/bubblewrap-check.js';
import { unboundedResourceRoutes, uncontainedRoutes } from './proxy/stdio/containment.js';
import { commandIssues } from './proxy/stdio/command-path.js';
import type { RunningGateway } from './gateway.js';
import { generateSigningKey } from './authorization-server/keys/signing-keys.js';
import { EXPLAIN_OPTIONS, EXPLAIN_USAGE, explainCommand } from './policy/explain.js';

/** After drain_delay + shutdown_grace, how long closing may still take before the process exits anyway. */
const FORCED_EXIT_SLACK_MS = 5_000;

const USAGE = `usage:
  mcp-auth-gateway [serve] --config <dir|file>   run the gateway (default config: ./policies)
  mcp-auth-gateway check   --config <dir|file> [--online]
                                                 validate the configuration and print the routes; --online also reaches
                                                 each route's issuer (metadata, JWKS) or introspection endpoint and upstream
  mcp-auth-gateway keys generate                 print a new private ES256 signing JWK
  mcp-auth-gateway demo                          gateway + built-in AS + dev login + a demo MCP server, on 127.0.0.1:8080 (PORT overrides)
  ${EXPLAIN_USAGE}
                                                 print the policy decision for one operation and the rule that makes it`;

export async function main(argv: string[]): Promise<number | undefined> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: { config: { type: 'string', short: 'c' }, help: { type: 'boolean', short: 'h' }, online: { type: 'boolean' }, ...EXPLAIN_OPTIONS },
    });
  } catch (err) {
    console.error(`${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const [command = 'serve', ...rest] = positionals;
  const source = values.config ?? 'policies';
  switch (command) {
    case 'serve':
      return serve(source);
    case 'check':
      return check(source, values.online ?? false);
    case 'demo':
      return (await import('./demo/demo.js')).demoCommand();
    case 'explain':
      return explainCommand(source, values);
    case 'keys':
      if (rest[0] !== 'generate') break;
      console.log(JSON.stringify(await generateSigningKey(), null, 2));
      return 0;
  }
  console.error(USAGE);
  return 2;
}

/** The configuration, or undefined once its issues are printed as `file:line:column: message`. */
async function loadOrReport(source: string): Promise<GatewayConfig | undefined> {
  try {
    return await loadConfig(source);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    console.error(err.message);
    return undefined;
  }
}

async function check(source: string, online: boolean): Promise<number> {
  const config = await loadOrReport(source);
  if (!config) return 1;
  console.log(describeRoutes(config));
  // Where nothing here ends what a server leaves behind (DESIGN.md §8.3): said, not refused.
  const stdioRoutes = config.routes.flatMap(upstreamRoutes);
  for (const warning of [...uncontainedRoutes(stdioRoutes), ...unboundedResourceRoutes(stdioRoutes)]) console.log(`warning: ${warning}`);
  // The same check a start makes: a stdio sandbox that cannot start on this host; and a stdio command that would not be found.
  const problems = [...(await sandboxIssues(config.routes.flatMap(upstreamRoutes))), ...commandIssues(config.routes.flatMap(upstreamRoutes))];
  if (problems.length > 0) {
    console.error(new ConfigError(problems).message);
    return 1;
  }
  if (!online) return 0;
  const { checkOnline } = await import('./check/online-check.js');
  const report = await checkOnline(config);
  console.log(report.lines.join('\n'));
  return report.ok ? 0 : 1;
}

async function serve(source: string): Promise<number | undefined> {
  const config = await loadOrReport(source);
  if (!config) return 1;
  // Handlers before the listener opens: with none, a SIGTERM that arrives
  // while starting kills the process outright (the kernel's default action).
  let early: NodeJS.Signals | undefined;
  let onSignal = (signal: NodeJS.Signals): void => {
    early ??= signal;
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
  // Imported here, not at the top: `check` and `explain` never load the server (a second of CPU at every start).
  const [{ startGateway }, { reloadOnChange }] = await Promise.all([import('./gateway.js'), import('./gateway/config-reloader.js')]);
  const gateway = await startGateway(config);
  const watcher = reloadOnChange(source, gateway);
  onSignal = shutdownOnSignal(gateway, watcher);
  if (early) onSignal(early);
  return undefined;
}

/** The SIGTERM / SIGINT handler: drain, then exit. */
function shutdownOnSignal(gateway: RunningGateway, watcher: { close(): void }): (signal: NodeJS.Signals) => void {
  const { logger } = gateway;
  let stopping = false;
  return (signal) => {
    if (stopping) {
      // Ctrl-C twice means now; a repeated SIGTERM (forwarded by a wrapper) changes nothing.
      if (signal !== 'SIGINT') return;
      logger.warn({ signal }, 'second interrupt: exiting without draining');
      process.exit(1);
    }
    stopping = true;
    watcher.close();
    // SIGTERM (Kubernetes, docker stop) waits drain_delay for load balancers to
    // catch up; Ctrl-C in a terminal has no load balancer to wait for.
    const { drainDelayMs, shutdownGraceMs } = gateway.config;
    const delayMs = signal === 'SIGINT' ? 0 : drainDelayMs;
    logger.info({ signal, drainDelayMs: delayMs, shutdownGraceMs }, 'shutting down');
    // Last resort if something will not close: the orchestrator's SIGKILL would follow anyway.
    setTimeout(() => {
      logger.error('drain did not finish in time');
      process.exit(1);
    }, delayMs + shutdownGraceMs + FORCED_EXIT_SLACK_MS).unref();
    // pino writes asynchronously: flush, or the last lines are lost on exit.
    const exit = (code: number) => logger.flush(() => process.exit(code));
    gateway.drain({ delayMs }).then(
      () => exit(0),
      (err) => {
        logger.error({ err }, 'drain failed');
        exit(1);
      },
    );
  };
}
