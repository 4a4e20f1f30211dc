;; An _initialize that traps.
(module
  (func (export "_initialize") (unreachable))
  (func (export "run") (result i32) (i32.const 0)))
