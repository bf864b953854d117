/**
 * Words for `text:` search. Both engines index the output of this function (instead of relying
 * on an engine analyzer), so they agree on what a word is.
 */
export function textTerms(s: string): string[] {
  return s
    .normalize('NFKC')
    .toLowerCase()
    .split(/[^\p{L}\p{N}_]+/u)
    .filter((t) => t.length > 0 && t.length <= 64);
}
