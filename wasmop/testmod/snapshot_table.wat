;; _initialize changes a table, and so does the entry: the engine takes no
;; snapshot of such a module (a snapshot holds memory and globals only,
;; SPECS.md §20.9), so every call outputs 2 (u32 LE).
(module
  (import "amduat" "output_write" (func $output_write (param i32 i32 i32)))
  (type $r (func (result i32)))
  (memory 1)
  (table 1 funcref)
  (func $one (result i32) (i32.const 1))
  (func $two (result i32) (i32.const 2))
  (func $three (result i32) (i32.const 3))
  (elem (i32.const 0) $one)
  (elem declare func $two $three)
  (func (export "_initialize") (table.set (i32.const 0) (ref.func $two)))
  (func (export "run") (result i32)
    (i32.store (i32.const 0) (call_indirect (type $r) (i32.const 0)))
    (table.set (i32.const 0) (ref.func $three))
    (call $output_write (i32.const 0) (i32.const 0) (i32.const 4))
    (i32.const 0)))
