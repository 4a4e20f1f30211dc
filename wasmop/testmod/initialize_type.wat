;; An _initialize export of the wrong type.
(module
  (func (export "_initialize") (result i32) (i32.const 0))
  (func (export "run") (result i32) (i32.const 0)))
