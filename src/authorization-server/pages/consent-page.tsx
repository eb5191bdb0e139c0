/** @jsxRuntime automatic */
/** @jsxImportSource hono/jsx */
// The per-client consent page (the confused-deputy defence): who is asking,
// where the answer will be sent, what for, and for which MCP server. Every
// client-supplied string is neutralised for display; JSX escapes it.
import type { Context } from 'hono';
import { AS_PAGES_PREFIX } from '../../config/reserved-paths.js';
import type { ClientRecord } from '../clients/client-record.js';
import type { Interaction } from '../interactions/interactions.js';
import { Layout } from './layout.js';
import { displayText, redirectTarget } from './display.js';
import { PAGE_HEADERS } from './security-headers.js';

/** Where the page posts the decision (the consent endpoint). */
export const CONSENT_PATH = `${AS_PAGES_PREFIX}consent`;

/** The consent page for one interaction, as a response: from /authorize, or again after a login for another user. */
/** `actsAtUpstream`: the upstream of a user_oauth route, where the application will act with the user's own account. */
export async function renderConsent(c: Context, client: ClientRecord, interaction: Interaction, csrfToken: string, actsAtUpstream?: string): Promise<Response> {
  const { request } = interaction;
  return c.html(
    <ConsentPage
      clientName={client.clientName}
      clientId={client.clientId}
      clientKind={client.kind}
      redirectUri={request.redirectUri}
      scopes={request.scopes}
      resource={request.resource}
      interactionId={interaction.id}
      csrfToken={csrfToken}
      action={CONSENT_PATH}
      actsAtUpstream={actsAtUpstream}
    />,
    200,
    PAGE_HEADERS,
  );
}

export interface ConsentView {
  clientName?: string;
  clientId: string;
  clientKind: 'static' | 'dynamic' | 'metadata_document';
  redirectUri: string;
  scopes: readonly string[];
  resource: string;
  /** Posted back with the decision. */
  interactionId: string;
  csrfToken: string;
  action: string;
  actsAtUpstream?: string;
}

export function ConsentPage(props: ConsentView) {
  const name = props.clientName ? displayText(props.clientName) : undefined;
  const identity =
    props.clientKind === 'metadata_document'
      ? `client_id ${displayText(props.clientId, 200)} (published by ${safeHost(props.clientId)})`
      : props.clientKind === 'static'
        ? 'registered by the administrator of this gateway'
        : 'registered itself dynamically: its name is not verified';
  return (
    <Layout title="Authorize access">
      <h1>
        Allow <bdi>{name ?? 'an unnamed application'}</bdi> to use this MCP server?
      </h1>
      <dl>
        <dt>Application</dt>
        <dd>
          <bdi>{name ?? '(no name given)'}</bdi>
          <div class="note">{identity}</div>
        </dd>
        <dt>Sends you back to</dt>
        <dd>
          <strong>{redirectTarget(props.redirectUri)}</strong>
        </dd>
        <dt>MCP server</dt>
        <dd>
          <code>{props.resource}</code>
        </dd>
        <dt>Access</dt>
        <dd>
          {props.scopes.length === 0 ? (
            'basic access (no scopes)'
          ) : (
            <ul class="scopes">
              {props.scopes.map((scope) => (
                <li>
                  <code>{scope}</code>
                </li>
              ))}
            </ul>
          )}
        </dd>
      </dl>
      {props.actsAtUpstream && <ActsAtUpstream upstream={props.actsAtUpstream} />}
      <p class="note">Only approve if you started this from an application you trust and the destination above is the one you expect.</p>
      <form method="post" action={props.action}>
        <input type="hidden" name="interaction" value={props.interactionId} />
        <input type="hidden" name="csrf" value={props.csrfToken} />
        <button class="primary" type="submit" name="decision" value="approve">
          Approve
        </button>
        <button type="submit" name="decision" value="deny">
          Deny
        </button>
      </form>
    </Layout>
  );
}

/** user_oauth: the app will use the user's own account at the MCP server behind the route. */
function ActsAtUpstream(props: { upstream: string }) {
  return (
    <p class="upstream-account">
      This application will act with <strong>your own account</strong> at <code>{props.upstream}</code>. If it is not connected yet, you will be asked to sign in there next.
    </p>
  );
}

function safeHost(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return '?';
  }
}
