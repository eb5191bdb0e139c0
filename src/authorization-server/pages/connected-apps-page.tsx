/** @jsxRuntime automatic */
/** @jsxImportSource hono/jsx */
// The connected-apps page: each app the signed-in user approved (name, client
// id or metadata document URL, where it sends them back, MCP server, scopes,
// approved at, last used), a Revoke form per app and a Sign-out form, both
// with the session's CSRF token. Client-supplied text is neutralised for
// display as on the consent page; JSX escapes it.
import type { Context } from 'hono';
import { ACCOUNT_PATHS } from '../../config/reserved-paths.js';
import type { ListedApp } from '../tokens/connected-apps.js';
import { Layout } from './layout.js';
import { UpstreamAccountsSection } from './upstream-accounts-page.js';
import type { ListedUpstreamAccount } from '../upstream-accounts/upstream-accounts.js';
import { displayText, redirectTarget } from './display.js';
import { PAGE_HEADERS } from './security-headers.js';

export interface ConnectedAppsView {
  subject: string;
  apps: readonly ListedApp[];
  csrfToken: string;
  /** user_oauth: the user's own accounts at upstreams. */
  upstreamAccounts?: readonly ListedUpstreamAccount[];
}

export async function renderConnectedApps(c: Context, view: ConnectedAppsView): Promise<Response> {
  return c.html(<ConnectedAppsPage {...view} />, 200, PAGE_HEADERS);
}

/** A moment, in UTC to the minute: the same text whatever the viewer's time zone. */
export function formatMoment(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 16).replace('T', ' ')} UTC`;
}

function ConnectedAppsPage(props: ConnectedAppsView) {
  return (
    <Layout title="Connected apps">
      <h1>Connected apps</h1>
      <p class="note">
        Signed in as <bdi>{displayText(props.subject, 64)}</bdi>. These applications can use MCP servers behind this gateway on your behalf. Revoking one signs it out at once; it has to ask you again.
      </p>
      {props.apps.length === 0 ? (
        <p class="empty">You have not approved any application yet. When you approve one, it appears here.</p>
      ) : (
        props.apps.map((app) => <AppEntry app={app} csrfToken={props.csrfToken} />)
      )}
      <UpstreamAccountsSection accounts={props.upstreamAccounts ?? []} csrfToken={props.csrfToken} />
      <form method="post" action={ACCOUNT_PATHS.signOut}>
        <input type="hidden" name="csrf" value={props.csrfToken} />
        <button type="submit">Sign out</button>
      </form>
    </Layout>
  );
}

function AppEntry(props: { app: ListedApp; csrfToken: string }) {
  const { app } = props;
  const name = app.clientName ? displayText(app.clientName) : 'An unnamed application';
  return (
    <section class="app">
      <h2>
        <bdi>{name}</bdi>
      </h2>
      <dl>
        <dt>{app.clientKind === 'metadata_document' ? 'Client (metadata document)' : 'Client ID'}</dt>
        <dd>
          <code>{displayText(app.clientId, 200)}</code>
          <div class="note">{clientIdentity(app)}</div>
        </dd>
        <dt>Sends you back to</dt>
        <dd>
          <strong>{redirectTarget(app.redirectUri)}</strong>
        </dd>
        <dt>MCP server</dt>
        <dd>
          <code>{app.resource}</code>
        </dd>
        <dt>Access</dt>
        <dd>{app.scopes.length === 0 ? 'basic access (no scopes)' : app.scopes.map((s) => <code>{s} </code>)}</dd>
        <dt>Approved</dt>
        <dd>{formatMoment(app.approvedAt)}</dd>
        <dt>Last used</dt>
        <dd>{app.lastUsedAt === undefined ? 'not since it was approved' : formatMoment(app.lastUsedAt)}</dd>
      </dl>
      <form method="post" action={ACCOUNT_PATHS.revoke}>
        <input type="hidden" name="client_id" value={app.clientId} />
        <input type="hidden" name="csrf" value={props.csrfToken} />
        <button class="primary" type="submit">
          Revoke access
        </button>
      </form>
    </section>
  );
}

function clientIdentity(app: ListedApp): string {
  if (app.clientKind === 'metadata_document') return `published at ${safeHost(app.clientId)}`;
  if (app.clientKind === 'static') return 'registered by the administrator of this gateway';
  return 'registered itself dynamically: its name is not verified';
}

function safeHost(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return '?';
  }
}

/** After sign-out: nothing of the session is left; a link signs in again. */
export async function renderSignedOut(c: Context): Promise<Response> {
  return c.html(
    <Layout title="Signed out">
      <h1>Signed out</h1>
      <p>
        You are signed out of your connected apps. <a href={ACCOUNT_PATHS.apps}>Sign in again</a>
      </p>
    </Layout>,
    200,
    PAGE_HEADERS,
  );
}
