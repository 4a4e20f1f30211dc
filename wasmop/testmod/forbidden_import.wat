;; An import outside the allowed list.
(module
  (import "env" "now" (func (result i64)))
  (func (export "run") (result i32) (i32.const 0)))
