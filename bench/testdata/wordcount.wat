;; wordcount.wat: the word count of bench group wasm, written by hand in
;; the WebAssembly text format (the same count as package
;; wasmop/examples/wordcount/words: maximal runs of bytes that are not
;; ASCII white space; branch-free like it, but one byte per loop iteration
;; where package words takes 8). Export "wordcount": counts the words of
;; data input 0 and writes the count to output 0 as 8 bytes little-endian.
;; Built into wordcount.wasm with wabt 1.0.37:
;;   npx --yes -p wabt@1.0.37 wat2wasm wordcount.wat -o wordcount.wasm
(module
  (import "amduat" "input_read" (func $read (param i32 i64 i32 i32) (result i32)))
  (import "amduat" "output_write" (func $write (param i32 i32 i32)))
  ;; page 0: bytes 0..255 are 1 for white space, 0 otherwise; 256..263 the
  ;; result. Page 1: the 64 KiB read buffer.
  (memory (export "memory") 2)
  (data (i32.const 9) "\01\01\01\01\01")
  (data (i32.const 32) "\01")
  (func (export "wordcount") (result i32)
    (local $off i64) (local $n i32) (local $i i32) (local $count i64) (local $prev i32) (local $s i32)
    ;; Branch-free, as package words: a word starts at a byte that is not
    ;; white space after one that is (or after the start).
    (local.set $prev (i32.const 1))
    (block $eof
      (loop $chunks
        (local.set $n (call $read (i32.const 0) (local.get $off) (i32.const 65536) (i32.const 65536)))
        (br_if $eof (i32.eqz (local.get $n)))
        (local.set $i (i32.const 0))
        (loop $bytes
          (local.set $s (i32.load8_u (i32.load8_u offset=65536 (local.get $i))))
          (local.set $count (i64.add (local.get $count)
            (i64.extend_i32_u (i32.and (local.get $prev) (i32.xor (local.get $s) (i32.const 1))))))
          (local.set $prev (local.get $s))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br_if $bytes (i32.lt_u (local.get $i) (local.get $n))))
        (local.set $off (i64.add (local.get $off) (i64.extend_i32_u (local.get $n))))
        (br $chunks)))
    (i64.store (i32.const 256) (local.get $count))
    (call $write (i32.const 0) (i32.const 256) (i32.const 8))
    (i32.const 0)))
