/**
 * Waiting in tests for a condition rather than a fixed time: a fixed sleep waits its whole length
 * on an idle machine and can still be too short on a loaded one; a poll returns as soon as the
 * condition holds and fails only after a generous bound.
 */

export async function waitFor(check: () => boolean | Promise<boolean>, timeoutMs = 10_000, what = 'condition'): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Sleeps until the wall clock is past `epochMs` (a token's exp, a stored refresh time); at once if it already is. */
export async function sleepUntil(epochMs: number): Promise<void> {
  const left = epochMs - Date.now();
  if (left > 0) await new Promise((r) => setTimeout(r, left));
}
