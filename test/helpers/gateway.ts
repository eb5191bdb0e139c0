/**
 * The one way to start the real gateway in-process: YAML written to a temp directory, logs
 * captured so tests can assert what was (not) logged, dev signing keys in a temp directory.
 * (The gateway as a child process, for signals and exit codes, is gateway-process.ts.)
 */
import { mkdtemp, writeFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { stringify } from 'yaml';
import { loadConfig } from '../../src/config/load.js';
import { startGateway, type RunningGateway, type StartOptions } from '../../src/gateway.js';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import type { Origin } from './gateway-config.js';
import { freePort } from './net.js';

/** The config directory: file name → YAML object (stringified) or text. */
export type ConfigFiles = Record<string, unknown>;

export interface TestGateway extends RunningGateway {
  dir: string;
  logs: string[];
  /** Writes `files` (name → object) into the config dir. */
  writeConfig(files: ConfigFiles): Promise<void>;
  stop(): Promise<void>;
}

/** A free port can be taken by another test file between freePort() and listen(): try again this often. */
const PORT_ATTEMPTS = 3;

/**
 * Starts a gateway from `files`. Given as a function of an Origin, the gateway listens on a free
 * loopback port whose origin is its public_url (the built-in AS's issuer, which the SDK's
 * discovery fetches).
 */
export async function startTestGateway(
  files: ConfigFiles | ((origin: Origin) => ConfigFiles),
  env: NodeJS.ProcessEnv = {},
  /** Extra start options (a recording store, an audit, authorization server test hooks). */
  options: StartOptions = {},
): Promise<TestGateway> {
  if (typeof files !== 'function') return startFrom(files, env, options);
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    try {
      return await startFrom(files({ port, url: `http://127.0.0.1:${port}` }), env, options);
    } catch (err) {
      if (attempt < PORT_ATTEMPTS && (err as NodeJS.ErrnoException).code === 'EADDRINUSE') continue;
      throw err;
    }
  }
}

async function startFrom(files: ConfigFiles, env: NodeJS.ProcessEnv, options: StartOptions): Promise<TestGateway> {
  const dir = await mkdtemp(join(tmpdir(), 'mag-'));
  // Next to the config, not in it (loadConfig reads every file there); never the cwd's .dev-keys.
  const keyDir = `${dir}-keys`;
  const remove = () => Promise.all([dir, keyDir].map((d) => rm(d, { recursive: true, force: true })));
  const writeConfig = async (more: ConfigFiles) => {
    for (const [name, content] of Object.entries(more)) {
      await writeFile(join(dir, name), typeof content === 'string' ? content : stringify(content));
    }
  };
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      logs.push(String(chunk));
      cb();
    },
  });
  let gateway: RunningGateway;
  try {
    await writeConfig(files);
    const config = await loadConfig(dir, { ...env });
    gateway = await startGateway(config, {
      ...options,
      authorizationServer: { devKeyDirectory: keyDir, ...options.authorizationServer },
      logger: createLogger(config.logLevel, sink),
      metrics: new Metrics({ defaultMetrics: false }),
    });
  } catch (err) {
    await remove();
    throw err;
  }
  return Object.assign(gateway, {
    dir,
    logs,
    writeConfig,
    async stop() {
      await gateway.close();
      await remove();
    },
  });
}
