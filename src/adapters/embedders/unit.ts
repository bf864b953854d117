/** Scales v[from, to) to length `weight` (all zeros stay zeros). Every embedder's last step. */
export function normalise(v: Float32Array, from = 0, to = v.length, weight = 1): void {
  let s = 0;
  for (let i = from; i < to; i++) s += v[i]! * v[i]!;
  const k = s > 0 ? weight / Math.sqrt(s) : 0;
  for (let i = from; i < to; i++) v[i]! *= k;
}
