package main

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/amduat/amduat/wasmop/testmod"
)

// writerProgram runs export "write" of wasmop/testmod's hostile module:
// N (program input 1, a u32) writes of 64 KiB to output 0, without a
// max_output_bytes of its own.
const writerProgram = `{"nodes":[{"id":1,"op":"amduat.wasm.run","version":1,
  "inputs":[{"input":0},{"input":1}],
  "params":{"export":"write","outputs":1,"max_memory_pages":1,"max_output_bytes":18446744073709551615}}],
 "roots":[{"node":1,"output":0}]}`

// TestWasmMemoryBudget: pel run's --max-memory bounds what a WebAssembly
// node holds (SPECS.md §20.8): a writer of 64 MiB under --max-memory 16M (8 MiB of it the table)
// stops before its output buffer grows to 8 MiB, with exit 8 and nothing
// stored; under 256M it succeeds.
func TestWasmMemoryBudget(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.initStore()
	mod := strings.TrimSpace(c.must(0, "wasm", "add", c.write("hostile.wasm", testmod.MustModule("hostile"))).stdout)
	prog := strings.TrimSpace(c.must(0, "pel", "build", c.write("writer.json", []byte(writerProgram))).stdout)
	n := c.write("n", binary.LittleEndian.AppendUint32(nil, 1024)) // 64 MiB
	r := c.must(exitInternal, "pel", "run", "--no-cache", "--max-memory", "16777216", "--program", prog, "--input", mod, "--input-file", n)
	if !strings.Contains(r.stderr, "out of memory: output_write needs") || !strings.Contains(r.stderr, "memory budget exceeded") {
		t.Errorf("stderr %q, want the memory budget of output_write", r.stderr)
	}
	res := runLines(t, c.must(0, "pel", "run", "--no-cache", "--max-memory", "268435456", "--program", prog, "--input", mod, "--input-file", n).stdout)
	if !strings.HasPrefix(res["status"], "OK ") {
		t.Errorf("under 256M: %v", res)
	}
}
