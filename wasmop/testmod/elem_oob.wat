;; An active element segment past the end of its table (the first one fits).
(module
  (table 2 funcref)
  (func $f)
  (elem (i32.const 1) $f)
  (elem (i32.const 2) $f)
  (func (export "run") (result i32) (i32.const 0)))
