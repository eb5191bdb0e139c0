// Durations in configuration (`500ms`, `60s`, `10m`, `12h`, `30d`) become
// milliseconds once, at load, so nothing at run time parses strings.

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

export function parseDuration(text: string): number {
  const match = /^([0-9]+)(ms|s|m|h|d)$/.exec(text);
  if (!match) throw new Error(`not a duration: ${JSON.stringify(text)}`);
  return Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
}
