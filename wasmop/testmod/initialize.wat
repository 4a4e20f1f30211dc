;; An _initialize export runs before the entry: output 0 is the global it
;; set (u32 LE 42).
(module
  (import "amduat" "output_write" (func $output_write (param i32 i32 i32)))
  (memory 1)
  (global $g (mut i32) (i32.const 0))
  (func (export "_initialize") (global.set $g (i32.const 42)))
  (func (export "run") (result i32)
    (i32.store (i32.const 0) (global.get $g))
    (call $output_write (i32.const 0) (i32.const 0) (i32.const 4))
    (i32.const 0)))
