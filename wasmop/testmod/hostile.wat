;; The hostile cases of the audit of issue 22 (SPECS.md §20.5, §20.8): each
;; export reads a u32 N (little-endian) from data input 0.
(module
  (import "amduat" "input_read" (func $input_read (param i32 i64 i32 i32) (result i32)))
  (import "amduat" "output_write" (func $output_write (param i32 i32 i32)))
  (memory (export "memory") 1)
  (table $t 0 funcref)

  ;; N: the u32 at the start of data input 0 (0 when shorter).
  (func $n (result i32)
    (drop (call $input_read (i32.const 0) (i64.const 0) (i32.const 0) (i32.const 4)))
    (i32.load (i32.const 0)))

  ;; memory.grow(N); if it succeeded, store 7 at 100000 and read it back.
  ;; Output 0: the u32 result of memory.grow, then the byte read back
  ;; (0 when the grow failed).
  (func (export "grow") (result i32)
    (i32.store (i32.const 4) (memory.grow (call $n)))
    (if (i32.ne (i32.load (i32.const 4)) (i32.const -1))
      (then
        (i32.store8 (i32.const 100000) (i32.const 7))
        (i32.store8 (i32.const 8) (i32.load8_u (i32.const 100000)))))
    (call $output_write (i32.const 0) (i32.const 4) (i32.const 5))
    (i32.const 0))

  ;; N nested calls of $down below the entry. Output 0: u32 N.
  (func $down (param $k i32) (result i32)
    (if (result i32) (i32.eqz (local.get $k))
      (then (i32.const 0))
      (else (i32.add (call $down (i32.sub (local.get $k) (i32.const 1))) (i32.const 1)))))
  (func (export "depth") (result i32)
    (i32.store (i32.const 4) (call $down (call $n)))
    (call $output_write (i32.const 0) (i32.const 4) (i32.const 4))
    (i32.const 0))

  ;; The same recursion, every level returning through return and br.
  (func $down_return (param $k i32) (result i32)
    (block $b
      (br_if $b (local.get $k))
      (return (i32.const 0)))
    (return (i32.add (call $down_return (i32.sub (local.get $k) (i32.const 1))) (i32.const 1))))
  (func (export "depth_return") (result i32)
    (i32.store (i32.const 4) (call $down_return (call $n)))
    (call $output_write (i32.const 0) (i32.const 4) (i32.const 4))
    (i32.const 0))

  ;; A function of two results leaving through return and through its end
  ;; (its body's wrapper block needs a type () -> (i32 i32), which the pass
  ;; appends). Output 0: the u32 results of $pair(1) and $pair(0).
  (func $pair (param $x i32) (result i32 i32)
    (if (local.get $x) (then (return (i32.const 1) (i32.const 2))))
    (i32.const 3) (i32.const 4))
  (func (export "pair") (result i32) (local $a i32) (local $b i32)
    (call $pair (i32.const 1))
    (local.set $b)
    (local.set $a)
    (i32.store (i32.const 4) (local.get $a))
    (i32.store (i32.const 8) (local.get $b))
    (call $pair (i32.const 0))
    (local.set $b)
    (local.set $a)
    (i32.store (i32.const 12) (local.get $a))
    (i32.store (i32.const 16) (local.get $b))
    (call $output_write (i32.const 0) (i32.const 4) (i32.const 16))
    (i32.const 0))

  ;; Writes the first 64 KiB of memory to output 0, N times.
  (func (export "write") (result i32) (local $i i32)
    (local.set $i (call $n))
    (block $done
      (loop $l
        (br_if $done (i32.eqz (local.get $i)))
        (call $output_write (i32.const 0) (i32.const 0) (i32.const 65536))
        (local.set $i (i32.sub (local.get $i) (i32.const 1)))
        (br $l)))
    (i32.const 0))

  ;; table.grow(N) of the table, twice. Output 0: both u32 results and the
  ;; table's size.
  (func (export "table_grow") (result i32)
    (i32.store (i32.const 4) (table.grow $t (ref.null func) (call $n)))
    (i32.store (i32.const 8) (table.grow $t (ref.null func) (call $n)))
    (i32.store (i32.const 12) (table.size $t))
    (call $output_write (i32.const 0) (i32.const 4) (i32.const 12))
    (i32.const 0)))
