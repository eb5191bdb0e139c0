// Starts the real gateway in-process from YAML written to a temp directory,
// with its logs captured so tests can assert what was (not) logged.
import { mkdtemp, writeFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { stringify } from 'yaml';
import { loadConfig } from '../../src/config/load.js';
import { startGateway, type RunningGateway, type StartOptions } from '../../src/gateway.js';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';

export interface TestGateway extends RunningGateway {
  dir: string;
  logs: string[];
  /** Writes `files` (name → object) into the config dir. */
  writeConfig(files: Record<string, unknown>): Promise<void>;
  stop(): Promise<void>;
}

export async function startTestGateway(
  files: Record<string, unknown>,
  env: NodeJS.ProcessEnv = {},
  /** Extra start options (a recording store, authorization server test hooks). */
  options: StartOptions = {},
): Promise<TestGateway> {
  const dir = await mkdtemp(join(tmpdir(), 'mag-'));
  const writeConfig = async (more: Record<string, unknown>) => {
    for (const [name, content] of Object.entries(more)) {
      await writeFile(join(dir, name), typeof content === 'string' ? content : stringify(content));
    }
  };
  await writeConfig(files);
  const config = await loadConfig(dir, { ...env });
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      logs.push(String(chunk));
      cb();
    },
  });
  const gateway = await startGateway(config, {
    ...options,
    logger: createLogger(config.logLevel, sink),
    metrics: new Metrics({ defaultMetrics: false }),
  });
  return Object.assign(gateway, {
    dir,
    logs,
    writeConfig,
    async stop() {
      await gateway.close();
      await rm(dir, { recursive: true, force: true });
    },
  });
}
