// Reload is validate-then-swap: the new configuration's route table is built
// whole before it replaces the old one, so a configuration that fails to
// build leaves the old one serving. Requests already running keep the table
// they started on.
import type { GatewayConfig } from '../config/types.js';
import type { Logger } from '../observability/logger.js';
import { closeRouteTable, type RouteTable } from './route-table.js';

export class LiveRoutes {
  constructor(
    public table: RouteTable,
    public config: GatewayConfig,
    private readonly build: (config: GatewayConfig) => Promise<RouteTable>,
    private readonly logger: Logger,
  ) {}

  async reload(next: GatewayConfig): Promise<void> {
    const previous = this.table;
    this.table = await this.build(next);
    this.config = next;
    logWarnings(next, this.logger);
    // The old table's requests get shutdown_grace to finish, the bound a
    // drain gives them too; then its pools close. Event streams still open
    // on it then are ended cleanly (the client reconnects to the new table).
    setTimeout(() => void closeRouteTable(previous), next.shutdownGraceMs).unref();
  }
}

export function logWarnings(config: GatewayConfig, logger: Logger): void {
  for (const warning of config.warnings) logger.warn(warning);
}
