;; A memory whose minimum is 65536 pages (4 GiB): valid WebAssembly, but
;; above the largest memory amduat.wasm.run gives, 65535 pages (SPECS.md
;; §20.5).
(module
  (memory 65536)
  (func (export "run") (result i32) (i32.const 0)))
