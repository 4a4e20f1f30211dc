;; A memory import (only functions may be imported).
(module
  (import "amduat" "memory" (memory 1))
  (func (export "run") (result i32) (i32.const 0)))
