// Member names that another reader could take for one the gateway reads. Go's
// encoding/json matches struct fields case-insensitively (with its own folding:
// `ſ` is `s`, the Kelvin sign `K` is `k`), other frameworks fold or normalise
// further. So in the objects whose members the gateway reads, a name that folds
// to one of those names must be exactly that name: `{"Method": …}`,
// `{"paramſ": …}` or `"Name"` beside `"name"` would be one message to the
// gateway and another to the upstream.

// Characters no reader should count: controls, format characters and other
// default-ignorables (a C parser stops at NUL, some frameworks strip the rest).
const IGNORED = /[\p{Cc}\p{Cf}\p{Default_Ignorable_Code_Point}]/gu;
const VISIBLE_ASCII = /^[\x21-\x7e]*$/;

/**
 * What a name looks like to the most forgiving reader: ignorables removed,
 * NFKC (fullwidth `Ｍ` is `M`, `ſ` is `s`), then case folded both ways
 * (`K` (Kelvin) and `ı` fold into ASCII).
 */
export function foldName(name: string): string {
  if (VISIBLE_ASCII.test(name)) return name.toLowerCase();
  return name.replace(IGNORED, '').normalize('NFKC').toUpperCase().toLowerCase().normalize('NFKC');
}

/** Thrown when an object has member names that two readers could match differently. */
export class AmbiguousMemberError extends Error {
  override readonly name = 'AmbiguousMemberError';
}

/**
 * Throws when a member of `object` folds to one of `names` without being
 * spelled exactly so. Two spellings of an unread name may stay: the gateway
 * does not judge what they carry.
 */
export function checkMemberNames(object: object, names: ReadNames, where: string): void {
  // for…in over own names: no array of keys nor iterator per message.
  for (const name in object) {
    if (names.exact.has(name) || !Object.hasOwn(object, name)) continue;
    const meant = names.byFold.get(foldName(name));
    // Only a name of ours is echoed: the client's spelling could be anything, of any length.
    if (meant !== undefined) throw new AmbiguousMemberError(`${where} has a member that differs from "${meant}" only by case or Unicode folding`);
  }
}

/** Names the gateway reads in one kind of object: exactly, and by their folded form. */
export interface ReadNames {
  exact: ReadonlySet<string>;
  byFold: ReadonlyMap<string, string>;
}

export const readNames = (...names: string[]): ReadNames => ({
  exact: new Set(names),
  byFold: new Map(names.map((name) => [foldName(name), name])),
});
