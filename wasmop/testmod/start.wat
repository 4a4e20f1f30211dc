;; A start function.
(module
  (func $s)
  (start $s)
  (func (export "run") (result i32) (i32.const 0)))
