package bench

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/bench/shapes"
	"github.com/amduat/amduat/internal/amduatbin"
	"github.com/amduat/amduat/internal/longtest"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
)

func TestTextbookOrderMatchesCanonical(t *testing.T) {
	progs := map[string]pel.Program{
		"chain":  shapes.Chain(50).Program,
		"fanin":  shapes.FanIn(50).Program,
		"single": shapes.Chain(1).Program,
	}
	// Random DAGs: node i reads up to three earlier nodes; ids have gaps so
	// id order and index order differ from 1..n.
	rng := rand.New(rand.NewPCG(1, 1))
	for k := range 20 {
		n := 2 + rng.IntN(60)
		nodes := make([]pel.Node, n)
		for i := range nodes {
			nodes[i] = pel.Node{ID: pel.NodeID(3*i + 1 + rng.IntN(3)), Op: opreg.OpConcat, Params: []byte{}}
			if i == 0 {
				nodes[i].Inputs = []pel.DagInput{pel.External(0)}
				continue
			}
			for range 1 + rng.IntN(3) {
				nodes[i].Inputs = append(nodes[i].Inputs, pel.FromNode(nodes[rng.IntN(i)].ID, 0))
			}
		}
		// Reverse some dependencies: a node may read a later one, so the
		// order is not simply ascending id.
		if n > 3 {
			nodes[0].Inputs = []pel.DagInput{pel.FromNode(nodes[n-1].ID, 0)}
			for i := 1; i < n; i++ {
				nodes[i].Inputs = slices.DeleteFunc(nodes[i].Inputs, func(in pel.DagInput) bool { return in.NodeID == nodes[0].ID })
				if len(nodes[i].Inputs) == 0 {
					nodes[i].Inputs = []pel.DagInput{pel.External(0)}
				}
			}
		}
		progs[fmt.Sprintf("random-%d", k)] = pel.Program{Nodes: nodes, Roots: []pel.RootRef{{NodeID: nodes[0].ID}}}
	}
	for name, p := range progs {
		want, err := pel.CanonicalOrder(p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := TextbookOrder(p); !slices.Equal(got, want) {
			t.Errorf("%s: textbook order %v, canonical %v", name, got, want)
		}
	}
}

func TestShapesDirectMatchesExec(t *testing.T) {
	for _, sh := range []shapes.Shape{shapes.Chain(1), shapes.Chain(2), shapes.Chain(100), shapes.FanIn(2), shapes.FanIn(100)} {
		t.Run(fmt.Sprintf("%s-%d", sh.Name, len(sh.Program.Nodes)), func(t *testing.T) {
			want, err := sh.Direct()
			if err != nil {
				t.Fatal(err)
			}
			a, err := pel.ProgramArtifact(sh.Program)
			if err != nil {
				t.Fatal(err)
			}
			var ops int
			outs, res := pel.ExecDAG(nil, a, nil, nil, pel.ObserverFunc(func(pel.NodeEvent) { ops++ }))
			if err := checkRun(outs, res, want); err != nil {
				t.Fatal(err)
			}
			if ops != len(sh.Program.Nodes) {
				t.Fatalf("Exec_DAG ran %d nodes, want %d", ops, len(sh.Program.Nodes))
			}
		})
	}
	// The fan-in's output is one byte per leaf; the chain's is 8 bytes.
	if out, _ := shapes.FanIn(10).Direct(); string(out.Bytes) != "xxxxxxxxx" {
		t.Fatalf("fan-in output %q", out.Bytes)
	}
	if out, _ := shapes.Chain(10).Direct(); string(out.Bytes) != "01234567" {
		t.Fatalf("chain output %q", out.Bytes)
	}
}

func TestSurfaceProgram(t *testing.T) {
	p := SurfaceProgram()
	if len(p.Nodes) != 100 {
		t.Fatalf("%d nodes, want 100", len(p.Nodes))
	}
	a, err := pel.ProgramArtifact(p)
	if err != nil {
		t.Fatal(err)
	}
	outs, res := pel.ExecDAG(nil, a, surfaceInputs(0), nil, nil)
	if res.Status != pel.StatusOK || len(outs) != 1 || len(outs[0].Bytes) != 33*32 {
		t.Fatalf("status %s, %d outputs", res.Status, len(outs))
	}
	other, _ := pel.ExecDAG(nil, a, surfaceInputs(1), nil, nil)
	if bytes.Equal(outs[0].Bytes, other[0].Bytes) {
		t.Fatal("different inputs give the same output")
	}
}

func TestWindowSeesAllocation(t *testing.T) {
	if RSSMethod() == RSSNone {
		t.Skip("no /proc here")
	}
	w := StartWindow()
	const n = 64 << 20
	b := make([]byte, n)
	for i := 0; i < n; i += 4096 {
		b[i] = 1
	}
	rss, heap := w.Stop()
	runtime.KeepAlive(b)
	if rss == nil || *rss < n {
		t.Fatalf("peak RSS %v after touching %d bytes (method %s)", rss, n, RSSMethod())
	}
	if heap < n {
		t.Fatalf("peak heap %d after allocating %d bytes", heap, n)
	}
}

// tinySizes make every group run in well under a second. The large
// artifact still spans several Pebble chunks (DefaultChunkSize, 256 KiB)
// and ends in a partial one; the small artifacts fill several batches and
// a partial one in both passes.
func tinySizes() Sizes {
	return Sizes{LargeBytes: 1<<20 + 12345, SmallCount: 1200, SmallSize: 1 << 10, SmallBatch: 500, SmallBigBatch: 1000,
		CLIFiles: 40, CLIFileSize: 1 << 10, ExecNodes: 2000, ExecReps: 2, SurfaceRuns: 6,
		ParallelNodes: 8, ParallelSize: 128 << 10, HostileMemory: 64 << 20, HostileTime: 3}
}

// amduatBinary builds the amduat command once for the tests and benchmarks
// that run it (internal/amduatbin: shared with cmd/amduat's tests).
var amduatBinary = sync.OnceValues(func() (string, error) { return amduatbin.Build(false) })

// longGroups are the groups TestGroupsTiny runs only with AMDUAT_LONG=1
// (internal/longtest): at tiny sizes each still costs 15 to 30 CPU
// seconds (MinIO, a serve process and its load run, hostile programs run
// to their limits).
var longGroups = map[string]bool{"s3": true, "server": true, "hostile": true}

// TestGroupsTiny runs every group at tiny sizes, each repeated measurement
// once: each returns its rows with positive figures, and leaves nothing
// behind in its directory. The groups in longGroups run with
// AMDUAT_LONG=1 only.
func TestGroupsTiny(t *testing.T) {
	wantRows := map[string][]string{
		"large-random": {"put", "get", "put-vs-disk", "put-rss", "get-rss"},
		"large-text":   {"put", "get", "put-rss", "get-rss", "put-vs-zstd", "stored-size"},
		"small":        {"put-batch", "put-batch-1000", "put-vs-fsync", "get-random"},
		"cli":          {"put-files", "put-files-vs-fsync-git"},
		"startup":      {"version", "has-1k", "get-1k", "deps-floor", "store-floor", "store-open-floor"},
		"snapshot":     {"put-r", "restore"},
		"exec":         {"chain/order", "chain/overhead", "chain/alloc", "chain/peak-heap", "fanin/order", "fanin/overhead", "fanin/alloc", "fanin/peak-heap"},
		"surface":      {"run-p50", "run-p99", "cache-hit-p50"},
		"lazy":         {"double-concat-rss", "double-concat-memo-rss", "1gib-run-rss"},
		"server": {"put-batch", "put-c1", "put-c16", "put-c64", "get-c1", "get-c16", "get-c64", "get-batch", "run-p50", "run-p99",
			"load-rate", "load-errors", "load-wrong", "large-put", "large-get", "get-vs-files-c1", "get-vs-files-c16", "large-get-vs-files",
			"large-put-rss-server", "large-put-rss-client", "large-get-rss-server", "large-get-rss-client", "write-rss"},
		"s3":       s3RowNames,
		"wasm":     {"call-overhead", "go-call-overhead", "wordcount", "wordcount-wat", "first-call/wordcount", "first-call/jsonfield", "first-call/thumbnail", "first-call-disk-cache/wordcount"},
		"parallel": {"wide-hash", "narrow-hash"},
		"hostile": {"concat5000/unlimited", "concat5000/limited", "doubling64/unlimited", "doubling64/limited",
			"chain/unlimited", "chain/limited", "fanin/unlimited", "fanin/limited",
			"wasm-memory-65535", "wasm-memory-65536", "wasm-write-320m", "wasm-write-1600m", "wasm-tables", "wasm-four-nodes", "wasm-deep-recursion",
			"chain-build-rss", "chain-run-rss"},
	}
	for _, g := range Groups() {
		t.Run(g.Name, func(t *testing.T) {
			if longGroups[g.Name] && !longtest.Enabled() {
				t.Skipf("runs servers and child processes for tens of CPU seconds: run with %s=1 (.ci/run's long step)", longtest.Env)
			}
			dir := t.TempDir()
			env := &Env{Sizes: tinySizes(), Dir: dir, Reps: 1}
			if g.Name == "wasm" && raceEnabled {
				// About 5 s without -race, minutes with it (wazero compiling
				// three 3 MB modules under the race detector).
				t.Skip("compiles WebAssembly modules: skipped under -race")
			}
			if g.Name == "cli" || g.Name == "startup" || g.Name == "snapshot" || g.Name == "server" || g.Name == "lazy" || g.Name == "s3" || g.Name == "hostile" {
				if testing.Short() {
					t.Skip("builds the amduat command")
				}
				bin, err := amduatBinary()
				if err != nil {
					t.Fatal(err)
				}
				env.AmduatBin = bin
			}
			rows, err := RunGroup(context.Background(), g, env)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, r := range rows {
				names = append(names, strings.TrimPrefix(r.Name, g.Name+"/"))
				if r.Skipped {
					if (g.Name == "cli" || g.Name == "startup") && (strings.Contains(r.Note, "git is not installed") || strings.Contains(r.Note, "go is not installed")) {
						continue
					}
					if strings.HasSuffix(r.Name, "-rss") && RSSMethod() == RSSNone {
						continue
					}
					t.Errorf("%s skipped: %s", r.Name, r.Note)
				}
				zero := r.Target != nil && r.Target.Cmp == AtMost && r.Target.Value == 0 // counts of errors
				if !(r.Figure.Value > 0) || r.Figure.Unit == "" {
					if !strings.HasSuffix(r.Name, "/overhead") && !(zero && r.Figure.Value == 0 && r.Figure.Unit != "") { // may be negative at tiny sizes
						t.Errorf("%s: figure %v", r.Name, r.Figure)
					}
				}
				if r.Baseline == nil || !(r.Baseline.Value > 0) || r.Baseline.What == "" {
					t.Errorf("%s: baseline %+v", r.Name, r.Baseline)
				}
				if r.Met == "" || (r.Target == nil) != (r.Met == MetNA) {
					t.Errorf("%s: target %+v but met %q", r.Name, r.Target, r.Met)
				}
			}
			if !slices.Equal(names, wantRows[g.Name]) {
				t.Errorf("rows %v, want %v", names, wantRows[g.Name])
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Errorf("the group left %d entries in its directory", len(left))
			}
		})
	}
}

func TestCLIGroupWithoutBinary(t *testing.T) {
	rows, err := RunGroup(context.Background(), mustLookup(t, "cli"), &Env{Sizes: tinySizes(), Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if !r.Skipped || r.Met != MetNA {
			t.Errorf("%s: skipped %v, met %q without a binary", r.Name, r.Skipped, r.Met)
		}
	}
}

func mustLookup(t testing.TB, name string) Group {
	g, ok := Lookup(name)
	if !ok {
		t.Fatalf("no group %s", name)
	}
	return g
}

func TestPutGetLargeRoundTrip(t *testing.T) {
	// HashStream and PutLarge agree on the reference; ZstdSize shrinks text.
	for _, k := range []Kind{Random, Text} {
		p, err := HashStream(k, 5, 1<<20+3)
		if err != nil {
			t.Fatal(err)
		}
		a, err := asl.Derive(asl.HashSHA256, asl.Untagged(readIn(t, NewStream(k, 5, 1<<20+3), 1<<16)))
		if err != nil || a != p.Ref {
			t.Fatalf("%s: HashStream derived %s, Derive %s (%v)", k, p.Ref, a, err)
		}
	}
	zr, _, err := ZstdSize(Random, 1, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	zt, _, err := ZstdSize(Text, 1, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if zr < 1<<20 || zt > zr/2 {
		t.Fatalf("zstd sizes: random %d, text %d", zr, zt)
	}
}

// benchSizes are the quick sizes, or the full ones with AMDUAT_HEAVY=1.
func benchSizes() Sizes {
	if os.Getenv("AMDUAT_HEAVY") == "1" {
		return FullSizes()
	}
	return QuickSizes()
}

// BenchmarkGroups runs each group of `amduat bench` (quick sizes; full
// sizes with AMDUAT_HEAVY=1) and reports every row's figure as a metric
// named after the row; the peak RSS is not isolated per group here, as it is
// in the command's child processes.
func BenchmarkGroups(b *testing.B) {
	for _, g := range Groups() {
		b.Run(g.Name, func(b *testing.B) {
			env := &Env{Sizes: benchSizes(), Dir: b.TempDir()}
			if g.Name == "cli" || g.Name == "hostile" {
				bin, err := amduatBinary()
				if err != nil {
					b.Skip(err)
				}
				env.AmduatBin = bin
			}
			var rows []Row
			for b.Loop() {
				var err error
				if rows, err = RunGroup(context.Background(), g, env); err != nil {
					b.Fatal(err)
				}
			}
			for _, r := range rows {
				if r.Skipped {
					continue
				}
				name := strings.TrimPrefix(r.Name, g.Name+"/")
				b.ReportMetric(r.Figure.Value, name+":"+r.Figure.Unit)
				if r.Ratio != nil {
					b.ReportMetric(*r.Ratio, name+":ratio")
				}
			}
		})
	}
}

// BenchmarkPlanRun and BenchmarkDirect measure one Exec_DAG of the quick
// chain and fan-in against the direct calls, per node, in b.N loops.
func BenchmarkPlanRun(b *testing.B) {
	for _, sh := range []shapes.Shape{shapes.Chain(100_000), shapes.FanIn(100_000)} {
		pl, err := pel.Prepare(sh.Program, nil)
		if err != nil {
			b.Fatal(err)
		}
		n := float64(len(sh.Program.Nodes))
		b.Run(sh.Name+"/PlanRun", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, res := pl.Run(nil, nil, nil); res.Status != pel.StatusOK {
					b.Fatal(res.Status)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/node")
		})
		b.Run(sh.Name+"/Direct", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := sh.Direct(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/node")
		})
		b.Run(sh.Name+"/CanonicalOrder", func(b *testing.B) {
			for b.Loop() {
				if _, err := pel.CanonicalOrder(sh.Program); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/node")
		})
	}
}

// TestPidCPU: the CPU time read for this process from /proc/PID/stat
// follows its own getrusage within a few ticks.
func TestPidCPU(t *testing.T) {
	if _, ok := pidCPU(os.Getpid()); !ok {
		t.Skip("no /proc/PID/stat here")
	}
	// Spin until this process has used 200 ms more CPU (by getrusage), not
	// for 200 ms of wall time: a loaded machine gives less CPU per second.
	x := 0
	for until := processCPU() + 200*time.Millisecond; processCPU() < until; x++ {
	}
	got, _ := pidCPU(os.Getpid())
	want := processCPU()
	if d := want - got; d < -50*time.Millisecond || d > 50*time.Millisecond || got < 150*time.Millisecond {
		t.Fatalf("/proc/PID/stat says %s of CPU, getrusage %s (after %d spins)", got, want, x)
	}
}
