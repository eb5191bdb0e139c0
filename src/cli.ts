// Entry point: serve | check | keys generate. Exit codes: 0 ok, 1 invalid
// configuration or failed start, 2 usage.
import { parseArgs } from 'node:util';
import { loadConfig } from './config/load.js';
import { ConfigError } from './config/config-error.js';
import { describeRoutes } from './config/describe.js';
import { startGateway } from './gateway.js';
import { watchConfig } from './config/watch.js';
import { generateSigningKey } from './keys.js';

const USAGE = `usage:
  mcp-auth-gateway [serve] --config <dir|file>   run the gateway (default config: ./policies)
  mcp-auth-gateway check   --config <dir|file>   validate the configuration and print the routes
  mcp-auth-gateway keys generate                 print a new private ES256 signing JWK`;

export async function main(argv: string[]): Promise<number | undefined> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: { config: { type: 'string', short: 'c' }, help: { type: 'boolean', short: 'h' } },
  });
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
      return check(source);
    case 'keys':
      if (rest[0] !== 'generate') break;
      console.log(JSON.stringify(await generateSigningKey(), null, 2));
      return 0;
  }
  console.error(USAGE);
  return 2;
}

async function check(source: string): Promise<number> {
  try {
    const config = await loadConfig(source);
    console.log(describeRoutes(config));
    return 0;
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      return 1;
    }
    throw err;
  }
}

async function serve(source: string): Promise<number | undefined> {
  let config;
  try {
    config = await loadConfig(source);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      return 1;
    }
    throw err;
  }
  const gateway = await startGateway(config);
  const { logger } = gateway;

  let reloading = Promise.resolve();
  const reload = (reason: string) => {
    reloading = reloading.then(async () => {
      try {
        await gateway.reload(await loadConfig(source));
        logger.info({ reason }, 'configuration reloaded');
      } catch (err) {
        // The last good configuration keeps serving.
        if (err instanceof ConfigError) logger.error({ reason, issues: err.message.split('\n') }, 'invalid configuration ignored');
        else logger.error({ reason, err }, 'reload failed');
      }
    });
  };
  const watcher = watchConfig(source, () => reload('file change'));
  process.on('SIGHUP', () => reload('SIGHUP'));

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    watcher.close();
    logger.info({ signal }, 'shutting down');
    gateway.drain().then(
      () => process.exit(0),
      (err) => {
        logger.error({ err }, 'drain failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  return undefined;
}
