;; A module without memory: only empty ranges at 0 are inside it.
(module
  (import "amduat" "output_write" (func $output_write (param i32 i32 i32)))
  (func (export "empty") (result i32)
    (call $output_write (i32.const 0) (i32.const 0) (i32.const 0)) (i32.const 0))
  (func (export "one") (result i32)
    (call $output_write (i32.const 0) (i32.const 0) (i32.const 1)) (i32.const 0)))
