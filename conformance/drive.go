package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// Case is one request with its expected answer: an embedded vector or a
// generated one.
type Case struct {
	Category string
	Vector
}

// Outcomes of a case in a conformance test (SPECS.md §21.5).
const (
	OutcomePass            = "pass"
	OutcomeFail            = "fail"
	OutcomeSkip            = "skip"
	OutcomeExpectedFailure = "expected_failure"
	OutcomeUnexpectedPass  = "unexpected_pass"
)

// CaseResult is the outcome of one case.
type CaseResult struct {
	ID       string `json:"id"`
	Category string `json:"category"`
	Kind     string `json:"kind"`
	Outcome  string `json:"outcome"`
	Reason   string `json:"reason,omitempty"`
	File     string `json:"file,omitempty"` // the standalone vector file written for a failure
}

// CategoryCount counts the outcomes of one category.
type CategoryCount struct {
	Category         string `json:"category"`
	Passed           int    `json:"passed"`
	Failed           int    `json:"failed"`
	Skipped          int    `json:"skipped"`
	ExpectedFailures int    `json:"expected_failures"`
	UnexpectedPasses int    `json:"unexpected_passes"`
}

func (c *CategoryCount) add(outcome string) {
	switch outcome {
	case OutcomePass:
		c.Passed++
	case OutcomeFail:
		c.Failed++
	case OutcomeSkip:
		c.Skipped++
	case OutcomeExpectedFailure:
		c.ExpectedFailures++
	case OutcomeUnexpectedPass:
		c.UnexpectedPasses++
	}
}

// String is "P passed, F failed, S skipped, X expected failures, U
// unexpected passes".
func (c CategoryCount) String() string {
	return fmt.Sprintf("%d passed, %d failed, %d skipped, %d expected failures, %d unexpected passes",
		c.Passed, c.Failed, c.Skipped, c.ExpectedFailures, c.UnexpectedPasses)
}

// TestReport is the outcome of a conformance test.
type TestReport struct {
	Implementation string          `json:"implementation"`
	Cases          int             `json:"cases"`
	Generated      int             `json:"generated"`
	Seed           uint64          `json:"seed"`
	Categories     []CategoryCount `json:"categories"`
	Total          CategoryCount   `json:"total"`
	Restarts       int             `json:"restarts"`
	FailureFiles   []string        `json:"failure_files"`
}

// OK reports whether the test passed: no unexpected failure or pass.
func (r TestReport) OK() bool { return r.Total.Failed == 0 && r.Total.UnexpectedPasses == 0 }

// TestOptions configures Test.
type TestOptions struct {
	// Command starts the testee: Command[0] with arguments Command[1:].
	Command []string
	// Dir is the testee's working directory ("" for the current one).
	Dir string
	// Vectors are the vector files run first (nil for none).
	Vectors fs.FS
	// Categories selects categories by name or name prefix ("asl" selects
	// asl.artifact, asl.derive, ...); empty selects all.
	Categories []string
	// ExpectedFailures are case ids, which must fail, or path.Match
	// patterns ("*.gen.*.blake3"), whose cases may fail (§21.5).
	ExpectedFailures []string
	// Generate differential cases after the vectors, from Seed.
	Generate int
	Seed     uint64
	// FailDir receives a standalone vector file per failing case ("" for
	// none).
	FailDir string
	// Timeout bounds the wait for one answer (default one minute); a
	// testee that exceeds it is killed and restarted, the case failed.
	Timeout time.Duration
	// Stderr receives the testee's stderr (nil discards it).
	Stderr io.Writer
	// Report, if non-nil, is called once per case.
	Report func(CaseResult)
}

// ErrTestee reports a testee that cannot be started or breaks the
// protocol in its hello answer.
var ErrTestee = errors.New("testee")

// maxRestarts bounds the restarts after crashes in one test.
const maxRestarts = 20

// ParseExpectedFailures reads an expected-failures file: one case id or
// pattern a line; blank lines and lines starting with # are ignored, as is
// anything after " #" on a line.
func ParseExpectedFailures(data []byte) ([]string, error) {
	var out []string
	for i, line := range strings.Split(string(data), "\n") {
		if j := strings.Index(line, " #"); j >= 0 {
			line = line[:j]
		}
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if _, err := path.Match(line, ""); err != nil {
			return nil, fmt.Errorf("line %d: bad pattern %q: %w", i+1, line, err)
		}
		out = append(out, line)
	}
	return out, nil
}

// expectation says whether id is listed: exactly (strict: it must fail)
// or only through a pattern (it may fail; a pass is a plain pass).
func expectation(list []string, id string) (listed, strict bool) {
	for _, p := range list {
		if p == id {
			return true, true
		}
	}
	for _, p := range list {
		if ok, _ := path.Match(p, id); ok {
			return true, false
		}
	}
	return false, false
}

func selected(cats []string, c string) bool {
	if len(cats) == 0 {
		return true
	}
	for _, s := range cats {
		if c == s || strings.HasPrefix(c, s+".") {
			return true
		}
	}
	return false
}

// Test drives the testee through every vector of opts.Vectors and then
// opts.Generate generated cases (SPECS.md §21). The error is non-nil only
// when the test could not be carried out (the testee does not start or
// breaks the protocol, the vectors cannot be read, ctx ends); failing cases
// are counted in the report.
func Test(ctx context.Context, opts TestOptions) (TestReport, error) {
	if len(opts.Command) == 0 {
		return TestReport{}, errors.New("no testee command")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = time.Minute
	}
	rep := TestReport{Generated: opts.Generate, Seed: opts.Seed, FailureFiles: []string{}}
	counts := map[string]*CategoryCount{}
	t, err := startTestee(ctx, opts)
	if err != nil {
		return rep, err
	}
	defer func() { t.close() }()
	rep.Implementation = t.hello.Implementation
	kinds := map[string]bool{}
	for _, k := range t.hello.Kinds {
		kinds[k] = true
	}
	regs := map[string]bool{"": true}
	for _, r := range t.hello.Registries {
		regs[r] = true
	}
	runCase := func(c Case) error {
		if !selected(opts.Categories, c.Category) {
			return nil
		}
		rep.Cases++
		res := CaseResult{ID: c.ID, Category: c.Category, Kind: c.Kind}
		cc := counts[c.Category]
		if cc == nil {
			cc = &CategoryCount{Category: c.Category}
			counts[c.Category] = cc
		}
		if !kinds[c.Kind] || !regs[caseRegistry(c.Vector)] {
			res.Outcome = OutcomeSkip
			res.Reason = "kind not implemented by the testee"
			if kinds[c.Kind] {
				res.Reason = "registry " + caseRegistry(c.Vector) + " not implemented by the testee"
			}
		} else {
			reason, err := t.ask(ctx, c, opts)
			if err != nil {
				return err
			}
			expected, strict := expectation(opts.ExpectedFailures, c.ID)
			switch {
			case reason == "" && strict:
				res.Outcome = OutcomeUnexpectedPass
				res.Reason = "listed as an expected failure, but passed"
			case reason == "":
				res.Outcome = OutcomePass
			case expected:
				res.Outcome, res.Reason = OutcomeExpectedFailure, reason
			default:
				res.Outcome, res.Reason = OutcomeFail, reason
			}
			if res.Outcome == OutcomeFail && opts.FailDir != "" {
				p, err := writeFailure(opts.FailDir, c, reason)
				if err != nil {
					return err
				}
				res.File = p
				rep.FailureFiles = append(rep.FailureFiles, p)
			}
		}
		cc.add(res.Outcome)
		rep.Total.add(res.Outcome)
		if opts.Report != nil {
			opts.Report(res)
		}
		return nil
	}
	if opts.Vectors != nil {
		files, err := Load(opts.Vectors)
		if err != nil {
			return rep, err
		}
		for _, f := range files {
			for _, v := range f.Vectors {
				if err := runCase(Case{Category: f.Category, Vector: v}); err != nil {
					return rep, err
				}
			}
		}
	}
	if opts.Generate > 0 {
		// Cases are drawn (and answered by this implementation) on another
		// goroutine while the testee answers, in order, at most 64 ahead.
		type drawn struct {
			c   Case
			err error
		}
		ch := make(chan drawn, 64)
		gctx, stop := context.WithCancel(ctx)
		defer stop()
		go func() {
			defer close(ch)
			g := NewCaseGenerator(opts.Seed)
			for i := 0; i < opts.Generate; i++ {
				c, err := g.Next()
				if err != nil {
					err = fmt.Errorf("generating case %d: %w", i, err)
				}
				select {
				case ch <- drawn{c, err}:
				case <-gctx.Done():
					return
				}
				if err != nil {
					return
				}
			}
		}()
		for d := range ch {
			if d.err != nil {
				return rep, d.err
			}
			if err := runCase(d.c); err != nil {
				return rep, err
			}
		}
		if err := ctx.Err(); err != nil {
			return rep, err
		}
	}
	rep.Restarts = t.restarts
	names := make([]string, 0, len(counts))
	for n := range counts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		rep.Categories = append(rep.Categories, *counts[n])
	}
	rep.Total.Category = "total"
	return rep, nil
}

// caseRegistry is the exec_dag registry a case needs ("" for the kernel).
func caseRegistry(v Vector) string {
	if v.Kind != KindExecDAG {
		return ""
	}
	var in struct {
		Registry string `json:"registry"`
	}
	_ = json.Unmarshal(v.Input, &in)
	return in.Registry
}

func writeFailure(dir string, c Case, reason string) (string, error) {
	v := c.Vector
	v.Description = strings.TrimSpace(v.Description + " [testee failed: " + truncate(reason, 300) + "]")
	f := File{Format: Format, Category: c.Category, Vectors: []Vector{v}}
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	e.SetIndent("", "  ")
	if err := e.Encode(f); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	p := filepath.Join(dir, c.ID+".json")
	return p, writeFileAtomic(p, buf.Bytes())
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// testee is a running testee process.
type testee struct {
	opts     TestOptions
	cmd      *exec.Cmd
	in       io.WriteCloser
	w        *bufio.Writer
	out      *bufio.Reader
	hello    Hello
	nextID   uint64
	restarts int
	timer    *time.Timer
	mu       sync.Mutex
	timedOut bool
}

func startTestee(ctx context.Context, opts TestOptions) (*testee, error) {
	t := &testee{opts: opts}
	if err := t.start(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *testee) start(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, t.opts.Command[0], t.opts.Command[1:]...)
	cmd.Dir = t.opts.Dir
	cmd.Stderr = t.opts.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%w: starting %s: %w", ErrTestee, t.opts.Command[0], err)
	}
	t.mu.Lock()
	t.cmd, t.timedOut = cmd, false
	t.mu.Unlock()
	t.in, t.w, t.out = in, bufio.NewWriterSize(in, 64<<10), bufio.NewReaderSize(out, 64<<10)
	if t.timer == nil {
		t.timer = time.AfterFunc(time.Hour, t.kill)
		t.timer.Stop()
	}
	input, _ := MarshalJSON(map[string]string{"protocol": TesteeProtocol})
	resp, err := t.roundTrip(TesteeRequest{Kind: KindHello, Input: input})
	if err != nil {
		t.close()
		return fmt.Errorf("%w: hello: %w", ErrTestee, err)
	}
	if resp.Error != "" {
		t.close()
		return fmt.Errorf("%w: hello answered with error %q", ErrTestee, resp.Error)
	}
	var h Hello
	if err := decodeStrict(resp.Output, &h); err != nil {
		t.close()
		return fmt.Errorf("%w: hello answer: %w", ErrTestee, err)
	}
	if h.Protocol != TesteeProtocol {
		t.close()
		return fmt.Errorf("%w: speaks protocol %q, want %q", ErrTestee, h.Protocol, TesteeProtocol)
	}
	t.hello = h
	return nil
}

func (t *testee) kill() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.timedOut = true
	if t.cmd != nil && t.cmd.Process != nil {
		_ = t.cmd.Process.Kill()
	}
}

// close ends the testee: stdin closed, then wait (killed after the
// timeout).
func (t *testee) close() error {
	if t.cmd == nil {
		return nil
	}
	_ = t.w.Flush()
	_ = t.in.Close()
	t.timer.Reset(t.opts.Timeout)
	err := t.cmd.Wait()
	t.timer.Stop()
	t.mu.Lock()
	t.cmd = nil
	t.mu.Unlock()
	return err
}

// roundTrip sends one request and reads its answer, within the timeout.
func (t *testee) roundTrip(req TesteeRequest) (TesteeResponse, error) {
	req.ID = t.nextID
	t.nextID++
	b, err := MarshalJSON(req)
	if err != nil {
		return TesteeResponse{}, err
	}
	t.timer.Reset(t.opts.Timeout)
	defer t.timer.Stop()
	if err := WriteFrame(t.w, b); err != nil {
		return TesteeResponse{}, t.explain(fmt.Errorf("writing request: %w", err))
	}
	if err := t.w.Flush(); err != nil {
		return TesteeResponse{}, t.explain(fmt.Errorf("writing request: %w", err))
	}
	payload, err := ReadFrame(t.out)
	if err != nil {
		if err == io.EOF {
			err = errors.New("stdout closed")
		}
		return TesteeResponse{}, t.explain(fmt.Errorf("reading answer: %w", err))
	}
	var resp TesteeResponse
	if err := decodeStrict(payload, &resp); err != nil {
		return TesteeResponse{}, fmt.Errorf("malformed answer: %w", err)
	}
	if resp.ID != req.ID {
		return TesteeResponse{}, fmt.Errorf("answer has id %d, want %d", resp.ID, req.ID)
	}
	if resp.Error == "" && len(resp.Output) == 0 {
		return TesteeResponse{}, errors.New("answer has neither output nor error")
	}
	return resp, nil
}

func (t *testee) explain(err error) error {
	t.mu.Lock()
	to := t.timedOut
	t.mu.Unlock()
	if to {
		return fmt.Errorf("no answer within %s (testee killed): %w", t.opts.Timeout, err)
	}
	return err
}

// ask runs one case and returns why it failed ("" when it passed). A
// testee that crashes, times out or breaks the protocol fails the case and
// is restarted; the error is non-nil only when it cannot be restarted.
func (t *testee) ask(ctx context.Context, c Case, opts TestOptions) (string, error) {
	resp, err := t.roundTrip(TesteeRequest{Kind: c.Kind, Input: c.Input})
	if err != nil {
		reason := "testee: " + oneLine(err.Error())
		_ = t.close()
		if t.restarts >= maxRestarts {
			return "", fmt.Errorf("%w: gave up after %d restarts; last: %s", ErrTestee, t.restarts, reason)
		}
		t.restarts++
		if serr := t.start(ctx); serr != nil {
			return "", serr
		}
		return reason, nil
	}
	if resp.Error != "" {
		return "testee error: " + oneLine(resp.Error), nil
	}
	if bytes.Equal(resp.Output, c.Expect) {
		return "", nil // the same bytes: equal in canonical form too
	}
	got, err := CanonicalJSON(resp.Output)
	if err != nil {
		return "answer is not JSON: " + oneLine(err.Error()), nil
	}
	want, err := CanonicalJSON(c.Expect)
	if err != nil {
		return "", fmt.Errorf("case %s: expect: %w", c.ID, err)
	}
	if !bytes.Equal(got, want) {
		return describeDiff(got, want), nil
	}
	return "", nil
}

// describeDiff says where two canonical answers first differ.
func describeDiff(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(0, i-40)
	return fmt.Sprintf("answer differs at byte %d of the canonical JSON: got …%s, want …%s",
		i, truncate(string(got[from:]), 120), truncate(string(want[from:]), 120))
}
