// Server-provided DPoP nonces (RFC 9449 §8 at a resource, §9 at the token
// endpoint), stateless so that every replica accepts every other replica's
// nonce without a store round trip: a nonce is HMAC-SHA256(key, time slot),
// the key derived (HKDF) from a secret every replica shares. One nonce for the
// whole gateway (resources and the built-in AS): a client that keeps one
// nonce per origin does not bounce between them.
import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';

/** A nonce is handed out for one slot and accepted through the next (between one and two slots). */
export const NONCE_SLOT_SECONDS = 60;

export interface DpopNonces {
  /** The nonce to send in `DPoP-Nonce` now. */
  current(nowSeconds?: number): string;
  /**
   * Whether a proof's `nonce` claim is one this gateway handed out in the
   * current or the previous slot, or (another replica's clock a little ahead)
   * the next one. Anything else: stale, forged or not a string.
   */
  accepts(nonce: unknown, nowSeconds?: number): boolean;
}

/** `secret`: what every replica shares (`dpop_nonce_key`, or bytes derived from the AS's signing key). */
export function createDpopNonces(secret: string | Uint8Array): DpopNonces {
  const key = Buffer.from(hkdfSync('sha256', secret, 'mcp-auth-gateway', 'dpop nonces v1', 32));
  // One HMAC per slot, not per request: the last few slots' nonces are kept.
  const bySlot = new Map<number, Buffer>();
  const nonceOf = (slot: number): Buffer => {
    let nonce = bySlot.get(slot);
    if (nonce === undefined) {
      nonce = Buffer.from(createHmac('sha256', key).update(`dpop-nonce\0${slot}`).digest('base64url'));
      if (bySlot.size >= 8) bySlot.clear();
      bySlot.set(slot, nonce);
    }
    return nonce;
  };
  const slotAt = (nowSeconds: number) => Math.floor(nowSeconds / NONCE_SLOT_SECONDS);
  const now = () => Math.floor(Date.now() / 1000);
  return {
    current: (nowSeconds = now()) => nonceOf(slotAt(nowSeconds)).toString(),
    accepts(nonce, nowSeconds = now()) {
      if (typeof nonce !== 'string' || nonce.length > 64) return false;
      const presented = Buffer.from(nonce);
      const slot = slotAt(nowSeconds);
      return [slot, slot - 1, slot + 1].some((s) => {
        const expected = nonceOf(s);
        return expected.length === presented.length && timingSafeEqual(expected, presented);
      });
    },
  };
}
