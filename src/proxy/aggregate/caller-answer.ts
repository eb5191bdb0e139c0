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
