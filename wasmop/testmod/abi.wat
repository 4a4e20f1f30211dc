;; abi.wat: the test module of amduat.wasm.run v1 (SPECS.md §20). One
;; export per behaviour; every export has type () -> (i32).
;; Built into abi.wasm by build.sh (wabt's wat2wasm).
(module
  (import "amduat" "input_count" (func $input_count (result i32)))
  (import "amduat" "input_size" (func $input_size (param i32) (result i64)))
  (import "amduat" "input_tag" (func $input_tag (param i32) (result i64)))
  (import "amduat" "input_read" (func $input_read (param i32 i64 i32 i32) (result i32)))
  (import "amduat" "output_write" (func $output_write (param i32 i32 i32)))
  (import "amduat" "set_error" (func $set_error (param i32 i32)))
  (import "wasi_snapshot_preview1" "clock_time_get" (func $clock (param i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "random_get" (func $random (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
  (memory (export "memory") 1)
  (table 2 funcref)
  (elem (i32.const 0) $helper)
  (type $void (func))
  (data (i32.const 16) "boom")
  (data (i32.const 32) "to stderr\n")

  (func $helper (result i32) (i32.const 5))

  ;; Copies every data input, in order, to output 0, 7 bytes at a time.
  (func (export "echo") (result i32)
    (local $i i32) (local $off i64) (local $n i32)
    (block $done
      (loop $inputs
        (br_if $done (i32.ge_u (local.get $i) (call $input_count)))
        (local.set $off (i64.const 0))
        (block $eof
          (loop $chunks
            (local.set $n (call $input_read (local.get $i) (local.get $off) (i32.const 1024) (i32.const 7)))
            (br_if $eof (i32.eqz (local.get $n)))
            (call $output_write (i32.const 0) (i32.const 1024) (local.get $n))
            (local.set $off (i64.add (local.get $off) (i64.extend_i32_u (local.get $n))))
            (br $chunks)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $inputs)))
    (i32.const 0))

  ;; Output 0: input_count (u32 LE), then size and tag (i64 LE) of each input.
  (func (export "meta") (result i32)
    (local $i i32)
    (i32.store (i32.const 0) (call $input_count))
    (call $output_write (i32.const 0) (i32.const 0) (i32.const 4))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $i) (call $input_count)))
        (i64.store (i32.const 0) (call $input_size (local.get $i)))
        (i64.store (i32.const 8) (call $input_tag (local.get $i)))
        (call $output_write (i32.const 0) (i32.const 0) (i32.const 16))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $l)))
    (i32.const 0))

  ;; Reads input 0 at its end: output 0 is the count returned (u32 LE, 0).
  (func (export "read_at_end") (result i32)
    (i32.store (i32.const 0)
      (call $input_read (i32.const 0) (call $input_size (i32.const 0)) (i32.const 8) (i32.const 10)))
    (call $output_write (i32.const 0) (i32.const 0) (i32.const 4))
    (i32.const 0))
  (func (export "read_past_end") (result i32)
    (drop (call $input_read (i32.const 0)
      (i64.add (call $input_size (i32.const 0)) (i64.const 1)) (i32.const 8) (i32.const 10)))
    (i32.const 0))
  (func (export "read_negative_offset") (result i32)
    (drop (call $input_read (i32.const 0) (i64.const -1) (i32.const 8) (i32.const 10)))
    (i32.const 0))
  (func (export "bad_input_index") (result i32)
    (drop (call $input_size (call $input_count)))
    (i32.const 0))
  (func (export "read_outside_memory") (result i32)
    (drop (call $input_read (i32.const 0) (i64.const 0) (i32.const 65530) (i32.const 7)))
    (i32.const 0))
  (func (export "bad_output_index") (result i32)
    (call $output_write (i32.const 1) (i32.const 0) (i32.const 1))
    (i32.const 0))
  (func (export "write_outside_memory") (result i32)
    (call $output_write (i32.const 0) (i32.const 65535) (i32.const 2))
    (i32.const 0))

  ;; Failures reported by the module.
  (func (export "fail") (result i32)
    (call $set_error (i32.const 16) (i32.const 4))
    (i32.const 7))
  (func (export "fail_silent") (result i32) (i32.const 65535))
  (func (export "fail_stderr") (result i32)
    (i32.store (i32.const 0) (i32.const 32))
    (i32.store (i32.const 4) (i32.const 10))
    (drop (call $fd_write (i32.const 2) (i32.const 0) (i32.const 1) (i32.const 8)))
    (i32.const 1))
  (func (export "return_negative") (result i32) (i32.const -1))
  (func (export "return_65536") (result i32) (i32.const 65536))
  (func (export "exit") (result i32) (call $proc_exit (i32.const 3)) (i32.const 0))

  ;; Traps.
  (func (export "trap_unreachable") (result i32) (unreachable))
  (func (export "trap_div_zero") (result i32) (i32.div_u (i32.const 1) (i32.const 0)))
  (func (export "trap_overflow") (result i32) (i32.div_s (i32.const 0x80000000) (i32.const -1)))
  (func (export "trap_conversion") (result i32) (i32.trunc_f32_s (f32.const nan)))
  (func (export "trap_trunc_range") (result i32) (i32.trunc_f32_s (f32.const 3e9)))
  (func (export "trap_memory") (result i32) (i32.load (i32.const 65534)))
  (func (export "trap_memory_fill") (result i32)
    (memory.fill (i32.const 65000) (i32.const 0) (i32.const 1000)) (i32.const 0))
  (func (export "trap_table_get") (result i32) (drop (table.get 0 (i32.const 2))) (i32.const 0))
  (func (export "trap_table") (result i32) (call_indirect (result i32) (i32.const 5)))
  (func (export "trap_null") (result i32) (call_indirect (result i32) (i32.const 1)))
  (func (export "trap_signature") (result i32)
    (call_indirect (type $void) (i32.const 0)) (i32.const 0))

  ;; Output 0: memory.grow(1), then memory.grow(100000), then memory.size
  ;; (i32 LE each).
  (func (export "grow") (result i32)
    (i32.store (i32.const 0) (memory.grow (i32.const 1)))
    (i32.store (i32.const 4) (memory.grow (i32.const 100000)))
    (i32.store (i32.const 8) (memory.size))
    (call $output_write (i32.const 0) (i32.const 0) (i32.const 12))
    (i32.const 0))

  ;; Output 0: the bits of NaNs produced by arithmetic (f32 0/0, f32
  ;; signalling-NaN + 1, f32 demote, f64 sqrt(-1), f64 promote of a NaN with
  ;; payload), then f32.neg of a NaN (bit-exact, not canonicalised).
  (func (export "nan") (result i32)
    (i32.store (i32.const 0) (i32.reinterpret_f32 (f32.div (f32.const 0) (f32.const 0))))
    (i32.store (i32.const 4) (i32.reinterpret_f32
      (f32.add (f32.reinterpret_i32 (i32.const 0x7fa00001)) (f32.const 1))))
    (i32.store (i32.const 8) (i32.reinterpret_f32
      (f32.demote_f64 (f64.reinterpret_i64 (i64.const 0xfff0000000000123)))))
    (i64.store (i32.const 12) (i64.reinterpret_f64 (f64.sqrt (f64.const -1))))
    (i64.store (i32.const 20) (i64.reinterpret_f64
      (f64.promote_f32 (f32.reinterpret_i32 (i32.const 0xffa00001)))))
    (i32.store (i32.const 28) (i32.reinterpret_f32 (f32.neg (f32.reinterpret_i32 (i32.const 0x7fa00001)))))
    (call $output_write (i32.const 0) (i32.const 0) (i32.const 32))
    (i32.const 0))

  ;; Output 0: two realtime and one monotonic clock reads (u64 LE), then 40
  ;; random bytes.
  (func (export "wasi") (result i32)
    (drop (call $clock (i32.const 0) (i64.const 1) (i32.const 0)))
    (drop (call $clock (i32.const 0) (i64.const 1) (i32.const 8)))
    (drop (call $clock (i32.const 1) (i64.const 1) (i32.const 16)))
    (drop (call $random (i32.const 24) (i32.const 40)))
    (call $output_write (i32.const 0) (i32.const 0) (i32.const 64))
    (i32.const 0))

  (func (export "nothing") (result i32) (i32.const 0))

  ;; dirty fills two pages with 0xff; dump grows by one page and writes
  ;; memory[1020, 1028) and memory[65530, 65542) to output 0: zeros in a
  ;; fresh instance, whatever an earlier call left in its memory.
  (func (export "dirty") (result i32)
    (drop (memory.grow (i32.const 1)))
    (memory.fill (i32.const 0) (i32.const 0xff) (i32.const 131072))
    (i32.const 0))
  (func (export "dump") (result i32)
    (drop (memory.grow (i32.const 1)))
    (call $output_write (i32.const 0) (i32.const 1020) (i32.const 8))
    (call $output_write (i32.const 0) (i32.const 65530) (i32.const 12))
    (i32.const 0))
  (func (export "takes_param") (param i32) (result i32) (i32.const 0))
  (func (export "spin") (result i32) (loop $l (br $l)) (i32.const 0))
  ;; Costs 11 units of fuel: its entry and 10 loop iterations.
  (func (export "count10") (result i32) (local $i i32)
    (loop $l
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (i32.const 10))))
    (i32.const 0))
  (func $recurse (export "recurse") (result i32) (i32.add (call $recurse) (i32.const 1)))
)
