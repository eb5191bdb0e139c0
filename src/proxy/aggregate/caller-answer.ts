// A request of one caller that its own credential answers instead of the
// upstream (DESIGN §8.1 in an aggregated route: the user has not connected
// their account at this upstream yet). Says nothing of the upstream's health:
// the caller gets the answer (a connect link), everyone else is served.

/** A JSON-RPC result or error, as the client reads it. */
export type CallerAnswer = { result: Record<string, unknown> } | { error: { code: number; message: string; data?: unknown } };

export class CallerAnswerError extends Error {
  /** `answerFor`: the answer in the form the client's protocol revision reads. */
  constructor(readonly answerFor: (protocolVersion: string) => CallerAnswer) {
    super("the caller's credential answered for the upstream");
    this.name = 'CallerAnswerError';
  }
}

/**
 * Failures of a caller's own credential for an upstream (its token exchange refused, its IdP
 * token or upstream grant gone, its refresh failed): marked as they leave the link, so that the
 * upstream's health, shared by every session, never counts them (one user cannot take a shared
 * upstream down for everyone). The error itself is what the caller gets, unchanged.
 */
const callersOwn = new WeakSet<object>();

/** Marks `err` as the caller's own credential failure and returns it. */
export function callersOwnFailure(err: unknown): unknown {
  if (typeof err === 'object' && err !== null) callersOwn.add(err);
  return err;
}

/** Whether `err` is the caller's own (its connect link to answer, or its credential that could not be made), never the upstream's. */
export function isCallersOwn(err: unknown): boolean {
  return err instanceof CallerAnswerError || (typeof err === 'object' && err !== null && callersOwn.has(err));
}
