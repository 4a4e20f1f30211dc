;; echo.wat: the trivial module of the call-overhead row of bench group
;; wasm. Export "echo" copies the first 64 bytes of data input 0 to
;; output 0. Built into echo.wasm with wabt 1.0.37:
;;   npx --yes -p wabt@1.0.37 wat2wasm echo.wat -o echo.wasm
(module
  (import "amduat" "input_read" (func $read (param i32 i64 i32 i32) (result i32)))
  (import "amduat" "output_write" (func $write (param i32 i32 i32)))
  (memory (export "memory") 1)
  (func (export "echo") (result i32)
    (call $write (i32.const 0) (i32.const 0)
      (call $read (i32.const 0) (i64.const 0) (i32.const 0) (i32.const 64)))
    (i32.const 0)))
