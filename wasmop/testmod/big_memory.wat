;; A memory whose minimum is 3 pages, with a declared maximum of 5.
(module
  (memory (export "memory") 3 5)
  (func (export "run") (result i32)
    (i32.store (i32.const 0) (memory.grow (i32.const 1)))
    (i32.const 0)))
