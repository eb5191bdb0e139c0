/** @jsxRuntime automatic */
/** @jsxImportSource hono/jsx */
// user_oauth on the account pages: the connected upstream accounts of
// /account/apps (route, upstream, scopes, connected at, last used) each with a
// Disconnect form, and the page a finished connection lands on.
import type { Context } from 'hono';
import { ACCOUNT_PATHS } from '../../config/reserved-paths.js';
import type { ListedUpstreamAccount } from '../upstream-accounts/upstream-accounts.js';
import { Layout } from './layout.js';
import { PAGE_HEADERS } from './security-headers.js';

const moment = (ms: number) => `${new Date(ms).toISOString().slice(0, 16).replace('T', ' ')} UTC`;

export function UpstreamAccountsSection(props: { accounts: readonly ListedUpstreamAccount[]; csrfToken: string }) {
  if (props.accounts.length === 0) return <></>;
  return (
    <>
      <h1>Connected accounts</h1>
      <p class="note">Your own accounts at these MCP servers. Applications you approved act with them through this gateway. Disconnecting one revokes it there where the server allows it.</p>
      {props.accounts.map((account) => (
        <section class="app upstream-account">
          <h2>
            <code>{account.routePath}</code>
          </h2>
          <dl>
            <dt>MCP server</dt>
            <dd>
              <code>{account.upstream}</code>
            </dd>
            <dt>Access</dt>
            <dd>{account.scopes.length === 0 ? 'as the server decides (no scopes asked)' : account.scopes.map((s) => <code>{s} </code>)}</dd>
            <dt>Connected</dt>
            <dd>{moment(account.connectedAt)}</dd>
            <dt>Last used</dt>
            <dd>{account.lastUsedAt === undefined ? 'not since it was connected' : moment(account.lastUsedAt)}</dd>
          </dl>
          <form method="post" action={ACCOUNT_PATHS.disconnect}>
            <input type="hidden" name="route" value={account.routePath} />
            <input type="hidden" name="csrf" value={props.csrfToken} />
            <button class="primary" type="submit">
              Disconnect
            </button>
          </form>
        </section>
      ))}
    </>
  );
}

export async function renderUpstreamConnected(c: Context, upstream: string): Promise<Response> {
  return c.html(
    <Layout title="Account connected">
      <h1>Account connected</h1>
      <p>
        Your account at <code>{upstream}</code> is connected. You can close this window and go back to your application.
      </p>
      <p class="note">
        You can disconnect it at any time on <a href={ACCOUNT_PATHS.apps}>your connected apps</a>.
      </p>
    </Layout>,
    200,
    PAGE_HEADERS,
  );
}
