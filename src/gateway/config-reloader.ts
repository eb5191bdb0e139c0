// Reloads a running gateway's configuration on a file change and on SIGHUP,
// one reload at a time. SIGHUP always re-reads (a secret file outside the
// watched directory, or a change the watch missed); the watch reloads only
// when the files' digest changed (config/watch.ts). An invalid configuration
// leaves the last good one serving: its issues are logged as file:line and
// counted, so neither a typo nor a failed build is silent.
import { ConfigError } from '../config/config-error.js';
import { loadConfig } from '../config/load.js';
import { watchConfig, type ConfigWatch, type WatchOptions } from '../config/watch.js';
import type { RunningGateway } from '../gateway.js';

export function reloadOnChange(source: string, gateway: RunningGateway, options?: WatchOptions): ConfigWatch {
  const { logger, metrics } = gateway;
  let reloading = Promise.resolve();
  const reload = (reason: string) => {
    reloading = reloading.then(async () => {
      try {
        await gateway.reload(await loadConfig(source));
        metrics.configReloads.inc({ result: 'ok' });
        logger.info({ reason, hash: gateway.config.digest }, 'configuration reloaded');
      } catch (err) {
        const invalid = err instanceof ConfigError;
        metrics.configReloads.inc({ result: invalid ? 'invalid' : 'failed' });
        if (invalid) logger.error({ reason, issues: err.message.split('\n') }, 'invalid configuration ignored');
        else logger.error({ reason, err }, 'reload failed');
      }
    });
  };
  const onHangup = () => reload('SIGHUP');
  process.on('SIGHUP', onHangup);
  const watch = watchConfig(source, () => reload('file change'), options);
  return {
    ready: watch.ready,
    close() {
      process.off('SIGHUP', onHangup);
      watch.close();
    },
  };
}
