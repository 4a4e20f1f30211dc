package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/amduat/amduat/asl/pebblestore"
)

// Sizes are the workload sizes of a run.
type Sizes struct {
	LargeBytes    int64 `json:"large_bytes"`     // each large artifact
	SmallCount    int   `json:"small_count"`     // small artifacts
	SmallSize     int   `json:"small_size"`      // bytes per small artifact
	SmallBatch    int   `json:"small_batch"`     // artifacts per PutBatch
	SmallBigBatch int   `json:"small_big_batch"` // artifacts per PutBatch, second pass
	CLIFiles      int   `json:"cli_files"`       // files given to one `amduat put`
	CLIFileSize   int   `json:"cli_file_size"`   // bytes per file
	ExecNodes     int   `json:"exec_nodes"`      // nodes per program
	ExecReps      int   `json:"exec_reps"`       // repetitions; the median is reported
	SurfaceRuns   int   `json:"surface_runs"`    // surface runs (and as many cache pairs)
	ParallelNodes int   `json:"parallel_nodes"`  // hash nodes of the parallel group's wide program
	ParallelSize  int   `json:"parallel_size"`   // bytes each of them hashes
	HostileMemory int64 `json:"hostile_memory"`  // GOMEMLIMIT, hence memory budget, of the hostile runs
	HostileTime   int   `json:"hostile_seconds"` // --timeout of the hostile runs, in seconds
}

// FullSizes are the sizes the targets are stated for.
func FullSizes() Sizes {
	return Sizes{LargeBytes: 1 << 30, SmallCount: 100_000, SmallSize: 1 << 10, SmallBatch: 1000, SmallBigBatch: 10_000,
		CLIFiles: 20_000, CLIFileSize: 1 << 10, ExecNodes: 1_000_000, ExecReps: 3, SurfaceRuns: 200,
		ParallelNodes: 64, ParallelSize: 1 << 20, HostileMemory: 1 << 30, HostileTime: 60}
}

// QuickSizes are the --quick sizes.
func QuickSizes() Sizes {
	return Sizes{LargeBytes: 64 << 20, SmallCount: 10_000, SmallSize: 1 << 10, SmallBatch: 1000, SmallBigBatch: 10_000,
		CLIFiles: 2_000, CLIFileSize: 1 << 10, ExecNodes: 100_000, ExecReps: 3, SurfaceRuns: 50,
		ParallelNodes: 64, ParallelSize: 1 << 20, HostileMemory: 256 << 20, HostileTime: 15}
}

// Env is what a group needs to run.
type Env struct {
	Sizes Sizes
	// Dir holds the group's temporary stores and files; the group removes
	// what it creates.
	Dir string
	// AmduatBin is the amduat executable the cli group runs; empty skips it.
	AmduatBin string
	// Log receives one progress line per phase; nil discards them.
	Log io.Writer
	// Reps, when positive, caps how many times the groups that repeat a
	// measurement a fixed number of times (cli, snapshot, startup, s3's
	// large transfers) repeat it: the tests set 1 to check a group's rows
	// at the least cost. Zero keeps each group's own count.
	Reps int
}

// reps is n, capped by e.Reps when that is positive.
func (e *Env) reps(n int) int {
	if e.Reps > 0 {
		return min(e.Reps, n)
	}
	return n
}

func (e *Env) logf(format string, args ...any) {
	if e.Log != nil {
		fmt.Fprintf(e.Log, "bench: "+format+"\n", args...)
	}
}

// tempDir creates a fresh directory under e.Dir; the caller removes it.
func (e *Env) tempDir(pattern string) (string, error) {
	dir := e.Dir
	if dir == "" {
		dir = os.TempDir()
	}
	return os.MkdirTemp(dir, "amduat-bench-"+pattern+"-")
}

// Group is a set of rows measured together (they share setup, such as a
// store filled by a put that the get then reads).
type Group struct {
	Name  string
	Title string
	Run   func(ctx context.Context, env *Env) ([]Row, error)
}

// Groups lists the groups in report order.
func Groups() []Group {
	return []Group{
		{"large-random", "incompressible large artifact: streaming put, verified get, memory", func(ctx context.Context, e *Env) ([]Row, error) { return runLarge(ctx, e, Random) }},
		{"large-text", "compressible large artifact: streaming put, verified get, memory, stored size", func(ctx context.Context, e *Env) ([]Row, error) { return runLarge(ctx, e, Text) }},
		{"small", "many 1 KiB artifacts: batch put, random get", runSmall},
		{"cli", "amduat put of many files against git hash-object", runCLI},
		{"startup", "process start: amduat version against a Go hello-world, has and get of 1 KiB against git cat-file", runStartup},
		{"snapshot", "directories as snapshots: put -r against put of the same files, get -r against cp -r", runSnapshot},
		{"exec", "large programs: canonical order, Exec_DAG overhead and allocation", runExec},
		{"surface", "surface runs of a 100-node program: latency, cache hits", runSurface},
		{"lazy", "amduat pel run over large inputs: peak RSS of the double concat and of a 1 GiB run", runLazy},
		{"parallel", "parallel evaluation against sequential: 64 hash nodes over 1 MiB inputs, and over 4 KiB", runParallel},
		{"hostile", "hostile programs with and without limits, each in its own pel run process: status, peak RSS, time; pel build and pel run of a chain of exec_nodes nodes: peak RSS", runHostile},
		{"server", "amduat serve on loopback against the embedded store: small and large artifacts, runs, a load test", runServer},
		{"wasm", "amduat.wasm.run: per-call overhead against a kernel operation, a Go-built module's call against a trivial one, a CPU-bound module against native Go, first-call compile time of the examples", runWasm},
		{"s3", "asl/s3store against a local MinIO: batch put, random get, large put and get, each beside the raw minio-go client", runS3},
	}
}

// Select returns the groups named in names (a group is selected by its name
// or by a prefix ending at a '-': "large" selects large-random and
// large-text), in report order. No names selects all groups.
func Select(names []string) ([]Group, error) {
	all := Groups()
	if len(names) == 0 {
		return all, nil
	}
	var out []Group
	for _, n := range names {
		n = strings.TrimSpace(n)
		found := false
		for _, g := range all {
			if g.Name == n || strings.HasPrefix(g.Name, n+"-") {
				found = true
				if !slices.ContainsFunc(out, func(o Group) bool { return o.Name == g.Name }) {
					out = append(out, g)
				}
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown benchmark %q (known: %s)", n, strings.Join(GroupNames(), ", "))
		}
	}
	slices.SortFunc(out, func(a, b Group) int { return groupIndex(a.Name) - groupIndex(b.Name) })
	return out, nil
}

// GroupNames lists the group names in report order.
func GroupNames() []string {
	var ns []string
	for _, g := range Groups() {
		ns = append(ns, g.Name)
	}
	return ns
}

func groupIndex(name string) int {
	return slices.IndexFunc(Groups(), func(g Group) bool { return g.Name == name })
}

// Lookup returns the group called name.
func Lookup(name string) (Group, bool) {
	i := groupIndex(name)
	if i < 0 {
		return Group{}, false
	}
	return Groups()[i], true
}

// RunGroup runs g and evaluates its rows.
func RunGroup(ctx context.Context, g Group, env *Env) ([]Row, error) {
	rows, err := g.Run(ctx, env)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", g.Name, err)
	}
	for i := range rows {
		rows[i].Evaluate()
	}
	return rows, nil
}

// NewReport returns an empty report describing this machine.
func NewReport(quick bool, sizes Sizes) *Report {
	return &Report{
		Quick: quick, Sizes: sizes, RSSMethod: RSSMethod(), Rows: []Row{},
		Machine: Machine{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU(), Go: runtime.Version()},
	}
}

// Helpers shared by the groups.

// phase runs f with the pprof label phase=name, so that a CPU profile of a
// group (amduat bench --cpuprofile) splits by measurement with
// go tool pprof -tagfocus=phase=NAME. Goroutines f starts inherit the label;
// Pebble's background flushes and compactions, started earlier, do not.
func phase(ctx context.Context, name string, f func(context.Context)) {
	pprof.Do(ctx, pprof.Labels("phase", name), f)
}

// phaseHeader carries a bench client's phase label to the server it asks
// (verifiedGet sets it); the servers ignore it.
const phaseHeader = "X-Amduat-Bench-Phase"

// labelServe wraps h, the handler of an in-process server, so that the
// goroutine serving a connection carries the pprof label side=SIDE and,
// while it serves a request naming its client's phase in phaseHeader,
// phase=serve:PHASE: the work of reading the request, handling it and
// writing the answer is then counted apart from the client's (go tool
// pprof -tagfocus=phase=serve:get-vs-files-server). The labels stay on the
// connection's goroutine until its next request sets them again.
func labelServe(side string, h http.Handler) http.Handler {
	base := pprof.WithLabels(context.Background(), pprof.Labels("side", side))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := base
		if p := r.Header.Get(phaseHeader); p != "" {
			ctx = pprof.WithLabels(ctx, pprof.Labels("phase", "serve:"+p))
		}
		pprof.SetGoroutineLabels(ctx)
		h.ServeHTTP(w, r)
	})
}

const mib = 1 << 20

func mibPerSec(bytes int64, d time.Duration) float64 {
	return float64(bytes) / mib / d.Seconds()
}

func perSec(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentileMS is the q-th percentile of ds, in milliseconds.
func percentileMS(ds []time.Duration, q float64) float64 {
	return Percentile(durations(ds), q) / float64(time.Millisecond)
}

func durations(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = float64(d)
	}
	return out
}

// dirSize sums the sizes of the regular files under dir, except a store's
// reserve file (space kept free for a full disk, not data).
func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && d.Name() != pebblestore.ReserveFile {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

func sizeText(n int64) string {
	if n >= 1<<30 && n%(1<<30) == 0 {
		return fmt.Sprintf("%d GiB", n>>30)
	}
	if n >= mib && n%mib == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d B", n)
}

func rssOf(p *int64) string {
	if p == nil {
		return "n.a."
	}
	return formatValue(float64(*p)/mib) + " MiB"
}

func mibOf(p *int64) float64 {
	if p == nil {
		return 0
	}
	return float64(*p) / mib
}
