;; Int8 dot products with WebAssembly SIMD (scripts/build-wasm.mjs assembles this file into
;; int8-dot-wasm.ts). A query of int16 codes is multiplied with rows of int8 codes: each row is
;; `dp` bytes, dp a multiple of 16 (the rows are zero-padded), and the query dp int16 values.
;; The caller keeps |query| · 127 · dp below 2^31, so the int32 sums cannot overflow. `quantise`
;; turns a float32 row into such int8 codes.
(module
  ;; shared, so a loading thread can quantise rows into a matrix's memory in place
  (import "env" "memory" (memory 1 65536 shared))

  ;; The dot product of the query at $q with the row at $p.
  (func $dot (param $q i32) (param $p i32) (param $dp i32) (result i32)
    (local $acc v128) (local $c v128) (local $end i32)
    (local.set $end (i32.add (local.get $p) (local.get $dp)))
    (loop $col
      (local.set $c (v128.load (local.get $p)))
      (local.set $acc (i32x4.add (local.get $acc)
        (i32x4.dot_i16x8_s (i16x8.extend_low_i8x16_s (local.get $c)) (v128.load (local.get $q)))))
      (local.set $acc (i32x4.add (local.get $acc)
        (i32x4.dot_i16x8_s (i16x8.extend_high_i8x16_s (local.get $c))
          (v128.load offset=16 (local.get $q)))))
      (local.set $p (i32.add (local.get $p) (i32.const 16)))
      (local.set $q (i32.add (local.get $q) (i32.const 32)))
      (br_if $col (i32.lt_u (local.get $p) (local.get $end))))
    (i32.add
      (i32.add (i32x4.extract_lane 0 (local.get $acc)) (i32x4.extract_lane 1 (local.get $acc)))
      (i32.add (i32x4.extract_lane 2 (local.get $acc)) (i32x4.extract_lane 3 (local.get $acc)))))

  ;; out[i] = query · row (first + i), for i in [0, count): consecutive rows from $codes.
  (func (export "range")
    (param $q i32) (param $codes i32) (param $first i32) (param $count i32) (param $dp i32)
    (param $out i32)
    (local $p i32) (local $end i32)
    (local.set $p (i32.add (local.get $codes) (i32.mul (local.get $first) (local.get $dp))))
    (local.set $end (i32.add (local.get $out) (i32.shl (local.get $count) (i32.const 2))))
    (block $done
      (loop $row
        (br_if $done (i32.ge_u (local.get $out) (local.get $end)))
        (i32.store (local.get $out) (call $dot (local.get $q) (local.get $p) (local.get $dp)))
        (local.set $p (i32.add (local.get $p) (local.get $dp)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (br $row))))

  ;; out[i] = query · row rows[i], for i in [0, count): rows listed as int32 at $rows.
  (func (export "gather")
    (param $q i32) (param $codes i32) (param $rows i32) (param $count i32) (param $dp i32)
    (param $out i32)
    (local $end i32)
    (local.set $end (i32.add (local.get $out) (i32.shl (local.get $count) (i32.const 2))))
    (block $done
      (loop $row
        (br_if $done (i32.ge_u (local.get $out) (local.get $end)))
        (i32.store (local.get $out)
          (call $dot (local.get $q)
            (i32.add (local.get $codes) (i32.mul (i32.load (local.get $rows)) (local.get $dp)))
            (local.get $dp)))
        (local.set $rows (i32.add (local.get $rows) (i32.const 4)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (br $row))))
;; The four float32 values at $p divided by $s (two float64 lanes, the same in both), rounded
;; to nearest, as four int32 lanes.
  (func $codes4 (param $p i32) (param $s v128) (result v128)
    (local $v v128)
    (local.set $v (v128.load (local.get $p)))
    (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23
      (i32x4.trunc_sat_f64x2_s_zero
        (f64x2.nearest (f64x2.div (f64x2.promote_low_f32x4 (local.get $v)) (local.get $s))))
      (i32x4.trunc_sat_f64x2_s_zero
        (f64x2.nearest (f64x2.div
          (f64x2.promote_low_f32x4
            (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $v) (local.get $v)))
          (local.get $s))))))

;; Scalar quantisation of the $n float32 values at $src ($n a multiple of 16) into int8 codes at
;; $dst; returns the row's scale s = fround(max |v| / 127), or 1 for a zero row. Each code is
;; v / s rounded to nearest, the division in float64: in float32 its rounding would add up to
;; 8e-6 of a step to the half step Int8Rows.load's bound allows.
  (func (export "quantise") (param $src i32) (param $n i32) (param $dst i32) (result f32)
    (local $p i32) (local $end i32) (local $m v128) (local $max f32) (local $s32 f32) (local $s f64) (local $sv v128)
    (local.set $p (local.get $src))
    (local.set $end (i32.add (local.get $src) (i32.shl (local.get $n) (i32.const 2))))
    (block $done
      (loop $lanes
        (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
        (local.set $m (f32x4.max (local.get $m) (f32x4.abs (v128.load (local.get $p)))))
        (local.set $p (i32.add (local.get $p) (i32.const 16)))
        (br $lanes)))
    (local.set $max
      (f32.max
        (f32.max (f32x4.extract_lane 0 (local.get $m)) (f32x4.extract_lane 1 (local.get $m)))
        (f32.max (f32x4.extract_lane 2 (local.get $m)) (f32x4.extract_lane 3 (local.get $m)))))
    (local.set $s32 (f32.demote_f64 (f64.div (f64.promote_f32 (local.get $max)) (f64.const 127))))
    ;; a subnormal scale can round down so far that the largest code would pass 127.5: the
    ;; next float32 up then serves
    (block $fits
      (loop $up
        (br_if $fits (i32.eqz (f64.gt
          (f64.div (f64.promote_f32 (local.get $max)) (f64.promote_f32 (local.get $s32)))
          (f64.const 127.5))))
        (local.set $s32
          (f32.reinterpret_i32 (i32.add (i32.reinterpret_f32 (local.get $s32)) (i32.const 1))))
        (br $up)))
    (local.set $s (f64.promote_f32 (local.get $s32)))
    ;; a zero (or not-a-number) row keeps scale 1, as `x || 1` would
    (if (i32.or (f64.eq (local.get $s) (f64.const 0)) (f64.ne (local.get $s) (local.get $s)))
      (then (local.set $s (f64.const 1))))
    (local.set $sv (f64x2.splat (local.get $s)))
    (local.set $p (local.get $src))
    (block $coded
      (loop $code
        (br_if $coded (i32.ge_u (local.get $p) (local.get $end)))
        (v128.store (local.get $dst)
          (i8x16.narrow_i16x8_s
            (i16x8.narrow_i32x4_s
              (call $codes4 (local.get $p) (local.get $sv))
              (call $codes4 (i32.add (local.get $p) (i32.const 16)) (local.get $sv)))
            (i16x8.narrow_i32x4_s
              (call $codes4 (i32.add (local.get $p) (i32.const 32)) (local.get $sv))
              (call $codes4 (i32.add (local.get $p) (i32.const 48)) (local.get $sv)))))
        (local.set $p (i32.add (local.get $p) (i32.const 64)))
        (local.set $dst (i32.add (local.get $dst) (i32.const 16)))
        (br $code)))
    (f32.demote_f64 (local.get $s)))
)
