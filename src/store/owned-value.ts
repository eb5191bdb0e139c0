// The value of a record that names who holds it (a session binding, a task
// owner, an event id): "<user>\n<principal>". The memory store's per-owner cap
// (memory-class-budgets.ts `perOwner`) counts the user part alone, so a user
// with many registered clients has one share (DESIGN.md §8.3, K81); the whole
// value still binds the record to the exact principal (issuer, sub, client_id).

const SEPARATOR = '\n';

/** `user` and `principal` must not contain a newline (JSON text and hashes do not). */
export const ownedValue = (user: string, principal: string): string => `${user}${SEPARATOR}${principal}`;

/** The part a per-owner cap counts: the user, or the whole value when it names no user part. */
export function ownerPartOf(value: string): string {
  const at = value.indexOf(SEPARATOR);
  return at < 0 ? value : value.slice(0, at);
}
