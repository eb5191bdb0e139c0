// Client-supplied text shown on our pages: escaping is JSX's job; this makes
// the text unable to disguise itself (bidi overrides that reverse a name,
// invisible characters, line breaks, absurd lengths).

/**
 * Code point ranges that are invisible or reorder text: C0/C1 controls, the
 * Arabic letter mark, Hangul fillers, Mongolian vowel separator, zero-width
 * characters and bidi marks, line/paragraph separators, bidi embeddings,
 * overrides and isolates, invisible operators, variation selectors, BOM,
 * interlinear annotations.
 */
const INVISIBLE_RANGES: ReadonlyArray<readonly [number, number]> = [
  [0x0000, 0x001f], [0x007f, 0x009f], [0x061c, 0x061c], [0x115f, 0x1160], [0x17b4, 0x17b5], [0x180e, 0x180e],
  [0x200b, 0x200f], [0x2028, 0x202e], [0x2060, 0x206f], [0x3164, 0x3164], [0xfe00, 0xfe0f], [0xfeff, 0xfeff],
  [0xffa0, 0xffa0], [0xfff9, 0xfffb], [0xe0000, 0xe007f],
];

const isInvisible = (codePoint: number) => INVISIBLE_RANGES.some(([from, to]) => codePoint >= from && codePoint <= to);

export function displayText(value: string, maxLength = 80): string {
  const visible = [...value.normalize('NFKC')].filter((ch) => !isInvisible(ch.codePointAt(0) as number)).join('');
  const cleaned = visible.replace(/\s+/gu, ' ').trim();
  const chars = [...cleaned];
  return chars.length > maxLength ? `${chars.slice(0, maxLength).join('')}…` : cleaned;
}

/**
 * What a redirect URI opens, in the user's words: a website's host (and
 * port); a program on this device for loopback http; for a private-use
 * scheme, the app that claims it, named by the whole URI (the page must not
 * call anything "an app on this device" without showing what it is).
 */
export function redirectTarget(uri: string): string {
  try {
    const url = new URL(uri);
    if (url.protocol === 'https:') return url.host;
    if (url.protocol === 'http:') return `a program on this device (${url.host})`;
    return `the app that opens ${displayText(uri)} on this device`;
  } catch {
    return displayText(uri);
  }
}
