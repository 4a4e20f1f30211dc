;; An allowed import name with the wrong type.
(module
  (import "amduat" "input_count" (func (param i32) (result i32)))
  (func (export "run") (result i32) (i32.const 0)))
