/**
 * SQLite compares TEXT as UTF-8 bytes, which is code-point order; JS `<` compares UTF-16 code
 * units, which differs when a character above U+FFFF meets one in U+E000–U+FFFF. Mapping the
 * first differing units (surrogates above the private-use and later units) restores the
 * code-point order without iterating whole strings.
 */
export function compareText(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) {
      const fx = x >= 0xd800 ? (x >= 0xe000 ? x - 0x800 : x + 0x2000) : x;
      const fy = y >= 0xd800 ? (y >= 0xe000 ? y - 0x800 : y + 0x2000) : y;
      return fx - fy;
    }
  }
  return a.length - b.length;
}
