;; Int8 dot products with WebAssembly SIMD (scripts/build-wasm.mjs assembles this file into
;; int8-dot-wasm.ts). A query of int16 codes is multiplied with rows of int8 codes: each row is
;; `dp` bytes, dp a multiple of 16 (the rows are zero-padded), and the query dp int16 values.
;; The caller keeps |query| · 127 · dp below 2^31, so the int32 sums cannot overflow.
(module
  (import "env" "memory" (memory 1))

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
)
