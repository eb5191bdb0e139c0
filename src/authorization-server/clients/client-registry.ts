// Finds a client by id: pre-registered in configuration, registered
// dynamically (in the store, expiring when unused), or — for an https
// client_id — described by its Client ID Metadata Document.
import type { StaticClientConfig } from '../../config/types.js';
import { clientKey } from '../../store/key-names.js';
import type { Store } from '../../store/store.js';
import { ClientMetadataDocumentError, isClientIdUrl, type ClientMetadataDocuments } from './client-id-metadata-document.js';
import type { ClientRecord } from './client-record.js';
import { hashSecret } from '../helpers/secrets.js';

/** A use restarts an unused registration's lifetime, but at most this often (one write per client per hour). */
const TOUCH_INTERVAL_MS = 60 * 60_000;

export type ClientLookup =
  | { found: true; client: ClientRecord }
  | { found: false; reason: string };

export interface ClientRegistryOptions {
  store: Store;
  staticClients: readonly StaticClientConfig[];
  /** undefined: Client ID Metadata Documents are disabled. */
  documents?: ClientMetadataDocuments;
  /** How long a dynamic registration lives without being used. */
  registrationTtlMs: number;
}

export class ClientRegistry {
  private readonly staticClients = new Map<string, ClientRecord>();

  constructor(private readonly options: ClientRegistryOptions) {
    for (const c of options.staticClients) {
      this.staticClients.set(c.clientId, {
        clientId: c.clientId,
        kind: 'static',
        redirectUris: c.redirectUris,
        grantTypes: c.grantTypes,
        tokenEndpointAuthMethod: c.clientSecret ? 'client_secret_basic' : 'none',
        applicationType: 'web',
        ...(c.clientSecret && { secretHash: hashSecret(c.clientSecret) }),
        ...(c.clientName && { clientName: c.clientName }),
        ...(c.scopes && { allowedScopes: c.scopes }),
        issuedAt: 0,
      });
    }
  }

  async find(clientId: string): Promise<ClientLookup> {
    const fixed = this.staticClients.get(clientId);
    if (fixed) return { found: true, client: fixed };
    if (isClientIdUrl(clientId)) {
      if (!this.options.documents) return { found: false, reason: 'Client ID Metadata Documents are not accepted here' };
      try {
        return { found: true, client: await this.options.documents.resolve(clientId) };
      } catch (err) {
        if (err instanceof ClientMetadataDocumentError) return { found: false, reason: err.message };
        throw err;
      }
    }
    const stored = await this.options.store.get(clientKey(clientId));
    if (stored === undefined) return { found: false, reason: 'unknown client' };
    return { found: true, client: JSON.parse(stored) as ClientRecord };
  }

  async register(client: ClientRecord): Promise<void> {
    await this.options.store.set(clientKey(client.clientId), JSON.stringify({ ...client, lastUsedAt: Date.now() }), this.options.registrationTtlMs);
  }

  /** A dynamic registration that is used lives on: its lifetime restarts (at most once per TOUCH_INTERVAL_MS). */
  async touch(client: ClientRecord): Promise<void> {
    if (client.kind !== 'dynamic') return;
    if (Date.now() - (client.lastUsedAt ?? 0) < TOUCH_INTERVAL_MS) return;
    await this.register(client);
  }
}
