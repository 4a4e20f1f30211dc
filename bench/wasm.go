package bench

import (
	"bytes"
	"context"
	_ "embed" // the hand-written modules
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/wasmop"
	"github.com/amduat/amduat/wasmop/examples"
	"github.com/amduat/amduat/wasmop/examples/wordcount/words"
)

// The hand-written modules of the group, built from their .wat sources
// beside them (see the build line in each).
var (
	// echoModule copies the first 64 bytes of data input 0 to output 0.
	//go:embed testdata/echo.wasm
	echoModule []byte
	// watWordcount counts words as package words does, output u64 LE.
	//go:embed testdata/wordcount.wasm
	watWordcount []byte
)

// wasmCPUBytes bounds the size of the text the CPU-bound rows count words
// in: LargeBytes, at most 64 MiB.
const wasmCPUBytes = 64 << 20

// wasmProgram is a one-node program running export of the module (program
// input 0) on program inputs 1..dataInputs.
func wasmProgram(p wasmop.Params, dataInputs int) (asl.Artifact, error) {
	params, err := wasmop.EncodeParams(p)
	if err != nil {
		return asl.Artifact{}, err
	}
	ins := []pel.DagInput{pel.External(0)}
	for i := range dataInputs {
		ins = append(ins, pel.External(uint32(i+1)))
	}
	return pel.ProgramArtifact(pel.Program{Nodes: []pel.Node{{ID: 1, Op: wasmop.OpID, Inputs: ins, Params: params}},
		Roots: []pel.RootRef{{NodeID: 1}}})
}

// execOnce runs program on inputs and requires status OK with one output.
func execOnce(reg *opreg.Registry, program asl.Artifact, inputs []asl.Artifact) (asl.Artifact, error) {
	outs, res := pel.ExecDAG(reg, program, inputs, nil, nil)
	if res.Status != pel.StatusOK || len(outs) != 1 {
		msg := ""
		if len(res.Diagnostics) > 0 {
			msg = string(res.Diagnostics[len(res.Diagnostics)-1].Message)
		}
		return asl.Artifact{}, fmt.Errorf("run: status %s, %d outputs: %s", res.Status, len(outs), msg)
	}
	return outs[0], nil
}

// perCall times 5 batches of n runs of program under the pprof phase
// label and returns the median time per run.
func perCall(ctx context.Context, label string, reg *opreg.Registry, program asl.Artifact, inputs []asl.Artifact, n int) (time.Duration, error) {
	d, err := medianOf(ctx, label, 5, func() error {
		for range n {
			if _, err := execOnce(reg, program, inputs); err != nil {
				return err
			}
		}
		return nil
	})
	return d / time.Duration(n), err
}

// wasmText is n bytes of text: lowercase letters with a space or newline
// every 1 to 12 letters, from FillRandom.
func wasmText(n int) []byte {
	b := make([]byte, n)
	FillRandom(b, 14, 0)
	run := 0
	for i, r := range b {
		if run > 0 && (run >= 12 || r%7 == 0) {
			b[i] = " \n"[r&1]
			run = 0
			continue
		}
		b[i] = 'a' + r%26
		run++
	}
	return b
}

// medianOf runs f reps times under the pprof phase label and returns the
// median duration, or f's first error.
func medianOf(ctx context.Context, label string, reps int, f func() error) (time.Duration, error) {
	var ds []time.Duration
	var err error
	for range reps {
		phase(ctx, label, func(context.Context) {
			start := time.Now()
			err = f()
			ds = append(ds, time.Since(start))
		})
		if err != nil {
			return 0, err
		}
	}
	slices.Sort(ds)
	return ds[len(ds)/2], nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func runWasm(ctx context.Context, e *Env) ([]Row, error) {
	reg, done, err := wasmop.KernelRegistry(ctx, wasmop.Options{})
	if err != nil {
		return nil, err
	}
	defer done()
	var rows []Row

	// Per-call overhead: the trivial module against pel.bytes.concat, each
	// as a one-node program through Exec_DAG, on a 16-byte input.
	in := asl.Untagged([]byte("0123456789abcdef"))
	echoProg, err := wasmProgram(wasmop.Params{Export: "echo", Outputs: 1, MaxMemoryPages: 1, MaxOutputBytes: 64}, 1)
	if err != nil {
		return nil, err
	}
	concatProg, err := pel.ProgramArtifact(pel.Program{
		Nodes: []pel.Node{{ID: 1, Op: opreg.OpConcat, Inputs: []pel.DagInput{pel.External(0), pel.External(0)}, Params: []byte{}}},
		Roots: []pel.RootRef{{NodeID: 1}}})
	if err != nil {
		return nil, err
	}
	echoIns := []asl.Artifact{asl.Untagged(echoModule), in}
	out, err := execOnce(reg, echoProg, echoIns) // compiles
	if err != nil {
		return nil, fmt.Errorf("echo module: %w", err)
	}
	if !bytes.Equal(out.Bytes, in.Bytes) {
		return nil, fmt.Errorf("echo module output %q, want %q", out.Bytes, in.Bytes)
	}
	const calls = 500
	e.logf("wasm: %d x 5 calls of a trivial module and of pel.bytes.concat", calls)
	var wasmD, kernelD time.Duration
	w := StartWindow()
	cpu0 := processCPU()
	wasmD, err = perCall(ctx, "wasm-call", reg, echoProg, echoIns, calls)
	wasmCPU := (processCPU() - cpu0) / (5 * calls)
	if err == nil {
		kernelD, err = perCall(ctx, "kernel-call", reg, concatProg, []asl.Artifact{in}, calls*10)
	}
	rss, _ := w.Stop()
	if err != nil {
		return nil, err
	}
	rows = append(rows, Row{
		Name:     "wasm/call-overhead",
		Figure:   Quantity{us(wasmD), "µs/call"},
		Baseline: &Baseline{us(kernelD), "µs/call", "pel.bytes.concat, same Exec_DAG path"},
		Target:   &Target{"<= 50 µs/call", OnFigure, AtMost, 50},
		PeakRSS:  rss,
		Note: fmt.Sprintf("one-node program through pel.ExecDAG (decode, prepare, run), compiled module cached, the instance kept from the previous call and reset to the state after instantiation (SPECS.md §20.9), 64-byte echo of a 16-byte input; %d-byte module from testdata/echo.wat; median of 5 batches of %d calls (%d for concat); process CPU time (getrusage, all threads, GC included) %s µs/call",
			len(echoModule), calls, calls*10, formatValue(us(wasmCPU))),
	})

	// A Go-built module's call against the trivial one's, in the same run:
	// the wordcount example on the same 16 bytes, started from the
	// snapshot taken after its _initialize (SPECS.md §20.9), against the
	// same calls on an engine that instantiates and runs _initialize
	// every time.
	row, err := goCallOverhead(ctx, e, reg, in, wasmD)
	if err != nil {
		return nil, err
	}
	rows = append(rows, row)

	// CPU-bound: the wordcount example over 64 MiB against the same Go
	// code (package words) compiled natively.
	size := int(min(e.Sizes.LargeBytes, wasmCPUBytes))
	e.logf("wasm: wordcount over %s MiB, module against native Go", formatValue(float64(size)/mib))
	text := wasmText(size)
	wc := examples.Wordcount()
	wcProg, err := wasmProgram(wasmop.Params{Export: wc.Export, Outputs: 1, MaxMemoryPages: 1024, MaxOutputBytes: 64}, 1)
	if err != nil {
		return nil, err
	}
	wcIns := []asl.Artifact{asl.Untagged(wc.Module), asl.Untagged(text)}
	if _, err := execOnce(reg, wcProg, []asl.Artifact{wcIns[0], asl.Untagged([]byte("warm up"))}); err != nil {
		return nil, fmt.Errorf("wordcount module: %w", err)
	}
	reps := max(e.Sizes.ExecReps, 1)
	var want uint64
	w = StartWindow()
	cpu0 = processCPU()
	nd, err := medianOf(ctx, "native-wordcount", reps, func() error {
		var c words.Counter
		io.CopyBuffer(&c, bytes.NewReader(text), make([]byte, 64<<10))
		want = c.Count()
		return nil
	})
	if err != nil {
		return nil, err
	}
	nativeCPU := (processCPU() - cpu0) / time.Duration(reps)
	cpu0 = processCPU()
	wd, err := medianOf(ctx, "wasm-wordcount", reps, func() error {
		out, err := execOnce(reg, wcProg, wcIns)
		if err == nil && string(out.Bytes) != strconv.FormatUint(want, 10)+"\n" {
			err = fmt.Errorf("counted %q, native Go %d", out.Bytes, want)
		}
		return err
	})
	wcCPU := (processCPU() - cpu0) / time.Duration(reps)
	rss, _ = w.Stop()
	if err != nil {
		return nil, fmt.Errorf("wordcount module: %w", err)
	}
	rows = append(rows, Row{
		Name:     "wasm/wordcount",
		Figure:   Quantity{ms(wd), "ms"},
		Baseline: &Baseline{ms(nd), "ms", "the same Go code (package words), native"},
		Target:   &Target{"<= 3x native", OnRatio, AtMost, 3},
		PeakRSS:  rss,
		Note: fmt.Sprintf("%s MiB of text, %d words: wasmop/examples/wordcount through Exec_DAG (compiled module cached; the call starts from the snapshot taken after the Go runtime's _initialize, SPECS.md §20.9), %s MiB/s vs %s MiB/s native; median of %d; process CPU time per run (less sensitive to the machine's load) %s ms against %s ms native: %sx",
			formatValue(float64(size)/mib), want, formatValue(mibPerSec(int64(size), wd)), formatValue(mibPerSec(int64(size), nd)), reps,
			formatValue(ms(wcCPU)), formatValue(ms(nativeCPU)), formatValue(float64(wcCPU)/float64(max(nativeCPU, 1)))),
	})

	// The same count by a module written in the WebAssembly text format,
	// one byte per loop iteration (package words takes 8): the runtime's
	// speed on simple code, without the Go wasm backend's. No target: the
	// target is the Go-built row's.
	e.logf("wasm: wordcount over %s MiB, hand-written module", formatValue(float64(size)/mib))
	watProg, err := wasmProgram(wasmop.Params{Export: "wordcount", Outputs: 1, MaxMemoryPages: 2, MaxOutputBytes: 8}, 1)
	if err != nil {
		return nil, err
	}
	watIns := []asl.Artifact{asl.Untagged(watWordcount), asl.Untagged(text)}
	w = StartWindow()
	td, err := medianOf(ctx, "wat-wordcount", reps, func() error {
		out, err := execOnce(reg, watProg, watIns)
		if err == nil && (len(out.Bytes) != 8 || binary.LittleEndian.Uint64(out.Bytes) != want) {
			err = fmt.Errorf("output %x, want %d little-endian", out.Bytes, want)
		}
		return err
	})
	rss, _ = w.Stop()
	if err != nil {
		return nil, fmt.Errorf("wordcount.wat module: %w", err)
	}
	rows = append(rows, Row{
		Name:     "wasm/wordcount-wat",
		Figure:   Quantity{ms(td), "ms"},
		Baseline: &Baseline{ms(nd), "ms", "the same count in Go (package words), native"},
		PeakRSS:  rss,
		Note: fmt.Sprintf("bench/testdata/wordcount.wat (%d bytes) through Exec_DAG, compiled module cached: %s MiB/s; the first call compiled it; median of %d",
			len(watWordcount), formatValue(mibPerSec(int64(size), td)), reps),
	})

	// First call of each example on a fresh engine (no compiled module
	// in memory or on disk): validation, rewriting and compilation, then
	// the call; the baseline is the next, cached call.
	for _, ex := range examples.All() {
		e.logf("wasm: first call of %s (%d bytes)", ex.Name, len(ex.Module))
		w = StartWindow()
		first, next, err := firstCall(ctx, wasmop.Options{}, ex)
		rss, _ = w.Stop()
		if err != nil {
			return nil, err
		}
		rows = append(rows, Row{
			Name:     "wasm/first-call/" + ex.Name,
			Figure:   Quantity{ms(first), "ms"},
			Baseline: &Baseline{ms(next), "ms", "the second call (compiled module cached, from the snapshot)"},
			PeakRSS:  rss,
			Note:     fmt.Sprintf("%d-byte module (Go, wasip1), fresh engine without a disk cache: validation, NaN rewriting, wazero compilation, then one call (_initialize, which the snapshot of SPECS.md §20.9 is taken after, and the entry)", len(ex.Module)),
		})
	}

	// The first call of an engine whose disk cache an earlier engine
	// filled: what a new process pays for a module an earlier one ran.
	dir, err := e.tempDir("wasm")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	wc = examples.Wordcount()
	e.logf("wasm: first call of %s with a filled disk cache", wc.Name)
	cacheOpts := wasmop.Options{CacheDir: filepath.Join(dir, "wasm-cache")}
	cold, _, err := firstCall(ctx, cacheOpts, wc) // fills the disk cache
	if err != nil {
		return nil, err
	}
	w = StartWindow()
	warm, next, err := firstCall(ctx, cacheOpts, wc)
	rss, _ = w.Stop()
	if err != nil {
		return nil, err
	}
	rows = append(rows, Row{
		Name:     "wasm/first-call-disk-cache/" + wc.Name,
		Figure:   Quantity{ms(warm), "ms"},
		Baseline: &Baseline{ms(cold), "ms", "the first call that filled the disk cache"},
		PeakRSS:  rss,
		Note: fmt.Sprintf("a second fresh engine on the same wazero compilation cache directory: validation and rewriting again, compiled code read from disk, then one call; its next call %s ms",
			formatValue(ms(next))),
	})
	return rows, nil
}

// firstCall runs example ex twice on a new engine with opts, on two empty
// data inputs, which the examples answer at once after a full start (so
// what is measured is loading the module, not its work), and returns both
// durations.
func firstCall(ctx context.Context, opts wasmop.Options, ex examples.Example) (first, next time.Duration, err error) {
	reg, done, err := wasmop.KernelRegistry(ctx, opts)
	if err != nil {
		return 0, 0, err
	}
	defer done()
	prog, err := wasmProgram(wasmop.Params{Export: ex.Export, Outputs: ex.Outputs, MaxMemoryPages: 1024, MaxOutputBytes: 1 << 20}, 2)
	if err != nil {
		return 0, 0, err
	}
	ins := []asl.Artifact{asl.Untagged(ex.Module), asl.Untagged(nil), asl.Untagged(nil)}
	phase(ctx, "wasm-first-call", func(context.Context) {
		start := time.Now()
		_, res := pel.ExecDAG(reg, prog, ins, nil, nil)
		first = time.Since(start)
		start = time.Now()
		_, res2 := pel.ExecDAG(reg, prog, ins, nil, nil)
		next = time.Since(start)
		ran := res.Status == pel.StatusOK || res.Summary.StatusCode&0xFFFF0000 == wasmop.ModuleCodeBase
		if !ran || res.Status != res2.Status || res.Summary.StatusCode != res2.Summary.StatusCode {
			err = fmt.Errorf("%s: status %s 0x%08x, then %s 0x%08x; want the module's own answer twice", ex.Name, res.Status, res.Summary.StatusCode, res2.Status, res2.Summary.StatusCode)
		}
	})
	return first, next, err
}

// goCallOverhead is the row wasm/go-call-overhead: what a call of the
// wordcount example (a Go-built module) costs beyond a call of the trivial
// module (trivial per call, measured in the same run), with the snapshots
// of SPECS.md §20.9; the note gives the same call with fresh instances.
func goCallOverhead(ctx context.Context, e *Env, reg *opreg.Registry, in asl.Artifact, trivial time.Duration) (Row, error) {
	wc := examples.Wordcount()
	prog, err := wasmProgram(wasmop.Params{Export: wc.Export, Outputs: 1, MaxMemoryPages: 1024, MaxOutputBytes: 64}, 1)
	if err != nil {
		return Row{}, err
	}
	ins := []asl.Artifact{asl.Untagged(wc.Module), in}
	if _, err := execOnce(reg, prog, ins); err != nil { // compiles, takes the snapshot
		return Row{}, fmt.Errorf("wordcount module: %w", err)
	}
	const calls = 200
	e.logf("wasm: %d x 5 calls of the wordcount example on 16 bytes", calls)
	w := StartWindow()
	cpu0 := processCPU()
	d, err := perCall(ctx, "wasm-go-call", reg, prog, ins, calls)
	cpu := (processCPU() - cpu0) / (5 * calls)
	rss, _ := w.Stop()
	if err != nil {
		return Row{}, err
	}
	// The same calls on fresh instances (_initialize every time), fewer.
	freshReg, done, err := wasmop.KernelRegistry(ctx, wasmop.Options{FreshInstances: true})
	if err != nil {
		return Row{}, err
	}
	defer done()
	if _, err := execOnce(freshReg, prog, ins); err != nil {
		return Row{}, fmt.Errorf("wordcount module, fresh instances: %w", err)
	}
	const freshCalls = 20
	fresh, err := perCall(ctx, "wasm-go-call-fresh", freshReg, prog, ins, freshCalls)
	if err != nil {
		return Row{}, err
	}
	return Row{
		Name:     "wasm/go-call-overhead",
		Figure:   Quantity{us(d - trivial), "µs/call"},
		Baseline: &Baseline{us(trivial), "µs/call", "the trivial module's call (wasm/call-overhead), same run"},
		Target:   &Target{"<= 200 µs/call over the trivial module", OnFigure, AtMost, 200},
		PeakRSS:  rss,
		Note: fmt.Sprintf("a call of the wordcount example (%d-byte Go module, wasip1) on a 16-byte input through pel.ExecDAG, compiled module cached, started from the snapshot taken after _initialize on a kept instance (SPECS.md §20.9): %s µs/call in all, the figure is that minus the trivial module's call; median of 5 batches of %d; process CPU time %s µs/call. Fresh instances (instantiation and _initialize on every call, wasmop.Options.FreshInstances): %s µs/call (median of 5 batches of %d)",
			len(wc.Module), formatValue(us(d)), calls, formatValue(us(cpu)), formatValue(us(fresh)), freshCalls),
	}, nil
}
