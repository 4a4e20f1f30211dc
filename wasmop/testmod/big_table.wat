;; A table whose minimum exceeds 2^20 elements.
(module
  (table 1048577 funcref)
  (func (export "run") (result i32) (i32.const 0)))
