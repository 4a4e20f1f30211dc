package guest_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/internal/wasmcachetest"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/wasmop"
)

// buildProbe builds testdata/probe for wasip1 as a reactor module, or
// skips the test with one line when this toolchain cannot.
func buildProbe(t *testing.T) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "probe.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, "./testdata/probe")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("cannot build the probe module for GOOS=wasip1 GOARCH=wasm: %v: %s", err, bytes.TrimSpace(msg))
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// probePages is the memory limit of every run of the probe.
const probePages = 1024

// TestGuestThroughHost builds a module using every function of package
// guest and runs its exports through amduat.wasm.run. The engine reads
// the probe from the compilation cache the tests share
// (internal/wasmcachetest): the same toolchain builds the same probe, so
// it is compiled once, not on every run.
func TestGuestThroughHost(t *testing.T) {
	module := buildProbe(t)
	ctx := context.Background()
	var opts wasmop.Options
	if dir, err := wasmcachetest.Dir(); err != nil {
		t.Logf("no shared compilation cache (%v): compiling the probe here", err)
	} else {
		if err := wasmcachetest.Warm(dir, module, probePages); err != nil {
			t.Fatal(err)
		}
		opts.CacheDir = dir
	}
	reg, done, err := wasmop.KernelRegistry(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	info, err := wasmop.Inspect(module)
	if err != nil || !info.HasInitialize {
		t.Fatalf("probe module: %v, _initialize exported %t", err, info.HasInitialize)
	}
	hello := asl.Untagged([]byte("hello, guest"))
	tagged := asl.Artifact{Bytes: []byte("xyz"), Tag: 0x0102, HasTag: true}
	tests := []struct {
		export  string
		outputs uint32
		inputs  []asl.Artifact
		code    uint32 // 0: status OK
		want    []string
		msg     string
	}{
		{"meta", 1, []asl.Artifact{hello, tagged, asl.Untagged(nil)}, 0,
			[]string{"0 12 untagged\n1 3 0x00000102\n2 0 untagged\n"}, ""},
		{"meta", 1, nil, 0, []string{""}, ""},
		{"readat", 1, []asl.Artifact{hello}, 0, []string{"tail 3 \"est\" EOF\nend 0 EOF\nnegative true\n" +
			"reader \"llo, guest\" <nil> 12\ninput \"hello, guest\"\n"}, ""},
		{"outputs", 2, nil, 0, []string{"abc", "d"}, ""},
		{"panics", 0, nil, wasmop.ModuleCodeBase | 2, nil, "panic: boom"},
		{"plainerr", 0, nil, wasmop.ModuleCodeBase | 1, nil, "plain failure"},
		{"wrapped", 0, nil, wasmop.ModuleCodeBase | 77, nil, "context: operation failed with code 77: inner 1"},
		{"failcode", 0, nil, wasmop.ModuleCodeBase | 65535, nil, "largest code"},
	}
	for _, tt := range tests {
		t.Run(tt.export, func(t *testing.T) {
			params, err := wasmop.EncodeParams(wasmop.Params{Export: tt.export, Outputs: tt.outputs, MaxMemoryPages: probePages, MaxOutputBytes: 1 << 16})
			if err != nil {
				t.Fatal(err)
			}
			ins := []pel.DagInput{pel.External(0)}
			for i := range tt.inputs {
				ins = append(ins, pel.External(uint32(i+1)))
			}
			// A program needs a root: with no outputs, a const node is the
			// root (Exec_DAG evaluates every node, rooted or not).
			nodes := []pel.Node{{ID: 1, Op: wasmop.OpID, Inputs: ins, Params: params}}
			var roots []pel.RootRef
			for o := range tt.outputs {
				roots = append(roots, pel.RootRef{NodeID: 1, OutputIndex: o})
			}
			if tt.outputs == 0 {
				cp, _ := opreg.EncodeConstParams(opreg.ConstParams{})
				nodes = append(nodes, pel.Node{ID: 2, Op: opreg.OpConst, Params: cp})
				roots = []pel.RootRef{{NodeID: 2}}
			}
			prog, err := pel.ProgramArtifact(pel.Program{Nodes: nodes, Roots: roots})
			if err != nil {
				t.Fatal(err)
			}
			outs, res := pel.ExecDAG(reg, prog, append([]asl.Artifact{asl.Untagged(module)}, tt.inputs...), nil, nil)
			if tt.code == 0 {
				if res.Status != pel.StatusOK || len(outs) != len(tt.want) {
					t.Fatalf("status %s 0x%08x, %d outputs: %v", res.Status, res.Summary.StatusCode, len(outs), res.Diagnostics)
				}
				for i, o := range outs {
					if string(o.Bytes) != tt.want[i] || o.HasTag {
						t.Errorf("output %d = %q (tagged %t), want %q untagged", i, o.Bytes, o.HasTag, tt.want[i])
					}
				}
				return
			}
			if res.Status != pel.StatusRuntimeFailed || res.Summary.StatusCode != tt.code {
				t.Fatalf("status %s 0x%08x, want RUNTIME_FAILED 0x%08x", res.Status, res.Summary.StatusCode, tt.code)
			}
			var msgs []string
			for _, d := range res.Diagnostics {
				msgs = append(msgs, string(d.Message))
			}
			if !strings.Contains(strings.Join(msgs, "\n"), tt.msg) {
				t.Errorf("diagnostics %q lack %q", msgs, tt.msg)
			}
		})
	}
}
