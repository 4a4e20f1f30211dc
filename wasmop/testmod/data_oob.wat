;; An active data segment past the end of memory: instantiation traps.
(module
  (memory 1)
  (data (i32.const 65535) "ab")
  (func (export "run") (result i32) (i32.const 0)))
