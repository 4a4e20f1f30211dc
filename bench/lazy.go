package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/amduat/amduat/asl"
)

// lazyRun is one `amduat pel run` of the concat seed whose peak RSS is
// measured: inputs are generated streams stored first (not measured), the
// run's output reference is checked against the concatenation hashed here.
type lazyRun struct {
	name   string
	inputs []int64 // sizes; input i is the stream (Random, 40+i)
	same   bool    // both inputs are input 0 (concat(x, x))
	flags  []string
	what   string
}

func runLazy(ctx context.Context, e *Env) ([]Row, error) {
	// Full sizes: the 300 MB double concat, and a run whose two
	// 256 MiB inputs and 512 MiB output total 1 GiB; --quick scales both
	// by LargeBytes / 1 GiB.
	scale := func(n int64) int64 { return n * e.Sizes.LargeBytes >> 30 }
	runs := []lazyRun{
		{name: "lazy/double-concat-rss", inputs: []int64{scale(300_000_000)}, same: true,
			what: "concat(x, x) of a 300 MB input"},
		{name: "lazy/double-concat-memo-rss", inputs: []int64{scale(300_000_000)}, same: true, flags: []string{"--memo-nodes"},
			what: "concat(x, x) of a 300 MB input with --memo-nodes"},
		{name: "lazy/1gib-run-rss", inputs: []int64{scale(256 << 20), scale(256 << 20)},
			what: "concat of two 256 MiB inputs (inputs and output total 1 GiB)"},
	}
	var rows []Row
	for _, lr := range runs {
		row, err := lr.measure(ctx, e)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lr.name, err)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func (lr lazyRun) measure(ctx context.Context, e *Env) (Row, error) {
	row := Row{
		Name:   lr.name,
		Figure: Quantity{0, "MiB"},
		Target: &Target{fmt.Sprintf("<= %d MiB", rssTarget), OnFigure, AtMost, rssTarget},
	}
	if e.AmduatBin == "" {
		row.Skipped, row.Note = true, "no amduat executable to run"
		return row, nil
	}
	dir, err := e.tempDir("lazy")
	if err != nil {
		return row, err
	}
	defer os.RemoveAll(dir)
	store := filepath.Join(dir, "store")
	amduat := func(args ...string) (procRun, error) {
		return timeCommand(exec.CommandContext(ctx, e.AmduatBin, append([]string{"--store", store}, args...)...))
	}
	if _, err := amduat("init"); err != nil {
		return row, err
	}
	var refs []string
	var total int64
	for i, size := range lr.inputs {
		file := filepath.Join(dir, fmt.Sprintf("in%d", i))
		if err := writeStream(file, NewStream(Random, uint64(40+i), size)); err != nil {
			return row, err
		}
		r, err := amduat("put", file)
		if err != nil {
			return row, err
		}
		os.Remove(file)
		refs = append(refs, strings.TrimSpace(string(r.stdout)))
		total += size
	}
	want, err := concatRef(lr.inputs, lr.same)
	if err != nil {
		return row, err
	}
	if lr.same {
		refs = append(refs, refs[0])
		total *= 3 // read twice, written once at twice the size
	} else {
		total *= 2
	}
	prog, err := amduat("pel", "seed", "concat")
	if err != nil {
		return row, err
	}
	args := []string{"pel", "run", "--quiet", "--no-cache", "--program", strings.TrimSpace(string(prog.stdout))}
	for _, ref := range refs {
		args = append(args, "--input", ref)
	}
	e.logf("%s: pel run over %d MiB in, %d MiB flowing", lr.name, lr.inputs[0]>>20, total>>20)
	r, err := amduat(append(args, lr.flags...)...)
	if err != nil {
		return row, err
	}
	if got := strings.TrimSpace(string(r.stdout)); got != want.String() {
		return row, fmt.Errorf("output %s, want %s", got, want)
	}
	row.PeakRSS = r.maxRSS
	row.Figure.Value = mibOf(r.maxRSS)
	row.Baseline = &Baseline{float64(total) / (1 << 20), "MiB", "bytes the run reads and writes"}
	row.Note = fmt.Sprintf("peak RSS of the amduat process during %s, in %.1f s (output reference checked)", lr.what, r.d.Seconds())
	if r.maxRSS == nil {
		row.Skipped, row.Note = true, "peak RSS cannot be measured on this system"
	}
	return row, nil
}

// concatRef derives the reference of the concatenation of the inputs'
// streams (input 0 twice when same).
func concatRef(sizes []int64, same bool) (asl.Reference, error) {
	var rs []io.Reader
	var n int64
	for i, size := range sizes {
		rs = append(rs, NewStream(Random, uint64(40+i), size))
		n += size
	}
	if same {
		rs = append(rs, NewStream(Random, 40, sizes[0]))
		n *= 2
	}
	h, err := asl.NewHasher(asl.HashSHA256, asl.Header{Size: uint64(n)})
	if err != nil {
		return asl.Reference{}, err
	}
	if _, err := io.CopyBuffer(h, io.MultiReader(rs...), make([]byte, streamBuf)); err != nil {
		return asl.Reference{}, err
	}
	return h.Sum()
}
