/**
 * The dense linear algebra the tuned projection needs (contract §20). Symmetric and triangular
 * n × n matrices are kept packed: the upper triangle row by row in a Float64Array of n(n+1)/2,
 * element (i, j ≥ i) at rowBase(i, n) + j, which halves their memory. The n² and n³ loops read
 * rows contiguously and keep to one array type each, so V8 compiles them to tight machine code:
 * at D = 1,420 they are most of a fit's time.
 */

export const packedLength = (n: number): number => (n * (n + 1)) / 2;

/** Where row i of a packed n × n upper triangle would start if it began at column 0. */
export const rowBase = (i: number, n: number): number => i * n - (i * (i + 1)) / 2;

/** Rows packed 8 at a time, interleaved (block[j * 8 + r] = row r's j-th value). */
const BLOCK = 8;

/**
 * s += weight · Σ v vᵀ over `vectors`, for the packed symmetric n × n matrix s. Eight rows go
 * through the matrix at once: one read and write of s serves eight products, which is what
 * bounds this loop.
 */
export function addOuterProducts(
  s: Float64Array,
  n: number,
  vectors: readonly ArrayLike<number>[],
  weight = 1,
): void {
  const block = new Float64Array(n * BLOCK);
  for (let start = 0; start < vectors.length; start += BLOCK) {
    block.fill(0);
    const end = Math.min(start + BLOCK, vectors.length);
    for (let r = start; r < end; r++) {
      const v = vectors[r]!;
      for (let j = 0; j < n; j++) block[j * BLOCK + (r - start)] = v[j]!;
    }
    addBlock(s, n, block, weight, 0);
  }
}

/** s[i][j] += weight · Σ_r b[i][r] b[j][r] for from ≤ i ≤ j < n, s packed. */
function addBlock(s: Float64Array, n: number, b: Float64Array, weight: number, from: number): void {
  for (let i = from; i < n; i++) {
    const p = i * BLOCK;
    const a0 = weight * b[p];
    const a1 = weight * b[p + 1];
    const a2 = weight * b[p + 2];
    const a3 = weight * b[p + 3];
    const a4 = weight * b[p + 4];
    const a5 = weight * b[p + 5];
    const a6 = weight * b[p + 6];
    const a7 = weight * b[p + 7];
    const row = rowBase(i, n);
    for (let j = i; j < n; j++) {
      const q = j * BLOCK;
      s[row + j] +=
        a0 * b[q] +
        a1 * b[q + 1] +
        a2 * b[q + 2] +
        a3 * b[q + 3] +
        a4 * b[q + 4] +
        a5 * b[q + 5] +
        a6 * b[q + 6] +
        a7 * b[q + 7];
    }
  }
}

/**
 * a = Uᵀ U in place, for the packed symmetric a: the packed upper-triangular U is left.
 * Right-looking in panels of eight rows, so that nearly all the work is the trailing update,
 * done by the same eight-row kernel as addOuterProducts. Throws when a is not positive definite.
 */
export function choleskyInPlace(a: Float64Array, n: number): void {
  const block = new Float64Array(n * BLOCK);
  for (let p0 = 0; p0 < n; p0 += BLOCK) {
    const p1 = Math.min(p0 + BLOCK, n);
    for (let p = p0; p < p1; p++) {
      const rp = rowBase(p, n);
      for (let r = p0; r < p; r++) {
        const rr = rowBase(r, n);
        const u = a[rr + p];
        for (let j = p; j < n; j++) a[rp + j] -= u * a[rr + j];
      }
      const d = a[rp + p];
      if (!(d > 0)) throw new Error('matrix is not positive definite');
      const root = Math.sqrt(d);
      a[rp + p] = root;
      for (let j = p + 1; j < n; j++) a[rp + j] /= root;
    }
    block.fill(0);
    for (let r = p0; r < p1; r++)
      for (let i = p1, rr = rowBase(r, n); i < n; i++) block[i * BLOCK + (r - p0)] = a[rr + i];
    addBlock(a, n, block, -1, p1);
  }
}

/** b ← U⁻ᵀ b for the U left by choleskyInPlace (a forward substitution along U's rows). */
export function solveTransposed(u: Float64Array, n: number, b: Float64Array): void {
  for (let i = 0; i < n; i++) {
    const ri = rowBase(i, n);
    const x = b[i] / u[ri + i];
    b[i] = x;
    for (let j = i + 1; j < n; j++) b[j] -= u[ri + j] * x;
  }
}

/** b ← U⁻¹ b (a back substitution). */
export function solve(u: Float64Array, n: number, b: Float64Array): void {
  for (let i = n - 1; i >= 0; i--) {
    const ri = rowBase(i, n);
    let s = b[i];
    for (let j = i + 1; j < n; j++) s -= u[ri + j] * b[j];
    b[i] = s / u[ri + i];
  }
}

/**
 * Eigenvalues (descending) and unit eigenvectors (column e of `vectors`, n × n row-major) of the
 * small symmetric n × n matrix a (full, not packed), by cyclic Jacobi rotations; a is
 * overwritten. Jacobi is slow in n³ but exact and simple, and n here is the number of labels.
 */
export function symmetricEigen(
  a: Float64Array,
  n: number,
): { values: Float64Array; vectors: Float64Array } {
  const v = new Float64Array(n * n);
  for (let i = 0; i < n; i++) v[i * n + i] = 1;
  let scale = 0;
  for (let i = 0; i < n * n; i++) scale += a[i] * a[i];
  for (let sweep = 0; sweep < 100; sweep++) {
    let off = 0;
    for (let p = 0; p < n; p++) for (let q = p + 1; q < n; q++) off += a[p * n + q] ** 2;
    if (off <= 1e-30 * scale) break;
    for (let p = 0; p < n; p++)
      for (let q = p + 1; q < n; q++) {
        const apq = a[p * n + q];
        if (apq === 0) continue;
        // the rotation that zeroes a[p][q], in the numerically stable form (Golub & Van Loan 8.5)
        const theta = (a[q * n + q] - a[p * n + p]) / (2 * apq);
        const t = Math.sign(theta || 1) / (Math.abs(theta) + Math.sqrt(theta * theta + 1));
        const c = 1 / Math.sqrt(t * t + 1);
        const s = t * c;
        for (let k = 0; k < n; k++) {
          const akp = a[k * n + p];
          const akq = a[k * n + q];
          a[k * n + p] = c * akp - s * akq;
          a[k * n + q] = s * akp + c * akq;
        }
        for (let k = 0; k < n; k++) {
          const apk = a[p * n + k];
          const aqk = a[q * n + k];
          a[p * n + k] = c * apk - s * aqk;
          a[q * n + k] = s * apk + c * aqk;
        }
        for (let k = 0; k < n; k++) {
          const vkp = v[k * n + p];
          const vkq = v[k * n + q];
          v[k * n + p] = c * vkp - s * vkq;
          v[k * n + q] = s * vkp + c * vkq;
        }
      }
  }
  // a stable sort, so equal eigenvalues keep the order Jacobi left them in
  const order = Array.from({ length: n }, (_, i) => i).sort(
    (x, y) => a[y * n + y] - a[x * n + x] || x - y,
  );
  const values = new Float64Array(n);
  const vectors = new Float64Array(n * n);
  order.forEach((from, to) => {
    values[to] = a[from * n + from];
    for (let k = 0; k < n; k++) vectors[k * n + to] = v[k * n + from];
  });
  return { values, vectors };
}

/** Σ a_j b_j over the first n values. */
export function dot(a: ArrayLike<number>, b: ArrayLike<number>, n = a.length): number {
  let s = 0;
  for (let j = 0; j < n; j++) s += a[j]! * b[j]!;
  return s;
}
