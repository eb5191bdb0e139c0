// The response hook of the forwarder, as types only: the policy layer builds
// transforms (tools/list filtering) and the forwarder applies them, so both
// import this leaf and neither imports the other.

/** A rewrite of one response body, chunk by chunk. Throwing cuts the response (fail closed). */
export interface BodyTransform {
  /** The bytes to send now for this upstream chunk (empty: held back for now). */
  push(chunk: Buffer): Buffer;
  /** Whatever is still held back, once the upstream body is complete. */
  end(): Buffer;
  /** The rewritten body depends on the caller: no shared cache may keep it (`Cache-Control: private`). */
  readonly perCaller?: boolean;
  /**
   * Only reads: `push` returns each chunk as it came and `end` returns nothing, so the body keeps its
   * length and its `Content-Length` (otherwise the answer goes out chunked).
   */
  readonly readsOnly?: boolean;
  /**
   * Set by a transform that only reads, for an answer the gateway makes itself (an aggregated
   * route's): called instead of push and end with the value and `text`, its JSON.stringify (what
   * the client receives), so the value in hand is not read again from its text.
   */
  readonly readValue?: (value: unknown, text: string) => void;
}

/**
 * Picks the body transform for a response from its headers and status (200 when not given), or
 * none. The HTTP forwarder calls it for every final status: most transforms read 2xx answers only
 * (`isSuccess`); one that puts back what the gateway changed in the request (a substituted task
 * id) reads error answers too.
 */
export type ResponseTransform = (headers: Readonly<Record<string, string | string[] | undefined>>, status?: number) => BodyTransform | undefined;

export const isSuccess = (status = 200): boolean => status >= 200 && status < 300;
