package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/aslutil"
	"github.com/amduat/amduat/asl/pebblestore"
)

func init() { addCommand(newDemoCmd) }

// demoEnv is what demo steps share. Later steps read what earlier ones
// left: the store, the input files and their references, and named
// artifacts in refs.
type demoEnv struct {
	dir      string // the demo's working directory
	storeDir string // dir/store
	inputDir string // dir/inputs
	store    *pebblestore.Store
	inputs   []demoInput
	// refs holds named artifacts for later steps ("hello", "hello-tagged",
	// and one entry per input file under its name).
	refs map[string]asl.Reference
}

type demoInput struct {
	name string
	path string
	ref  asl.Reference
}

// demoStep is one step of `amduat demo`. Steps run in ascending order; each
// returns human-readable detail lines. The base steps use orders 10..90 in
// steps of 10 (verify is 90); a step added from another file picks an order
// between them.
type demoStep struct {
	order int
	name  string
	run   func(ctx context.Context, e *demoEnv) ([]string, error)
}

var demoSteps []demoStep

// addDemoStep registers a step; call it from init functions.
func addDemoStep(s demoStep) { demoSteps = append(demoSteps, s) }

func init() {
	addDemoStep(demoStep{10, "init", demoInit})
	addDemoStep(demoStep{20, "write inputs", demoWriteInputs})
	addDemoStep(demoStep{30, "put", demoPut})
	addDemoStep(demoStep{40, "put tagged", demoPutTagged})
	addDemoStep(demoStep{50, "put again", demoPutAgain})
	addDemoStep(demoStep{60, "get", demoGet})
	addDemoStep(demoStep{70, "stat", demoStat})
	addDemoStep(demoStep{75, "has", demoHas})
	addDemoStep(demoStep{90, "verify", demoVerify})
}

func sortedDemoSteps() []demoStep {
	steps := append([]demoStep(nil), demoSteps...)
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].order < steps[j].order })
	return steps
}

type demoStepResult struct {
	Name    string   `json:"name"`
	OK      bool     `json:"ok"`
	Details []string `json:"details"`
	Error   string   `json:"error,omitempty"`
}

type demoResult struct {
	Dir   string           `json:"dir"`
	Store string           `json:"store"`
	Kept  bool             `json:"kept"`
	OK    bool             `json:"ok"`
	Steps []demoStepResult `json:"steps"`
}

func newDemoCmd(a *app) *cobra.Command {
	var dir, planService string
	c := &cobra.Command{
		Use:   "demo [--dir DIR] | demo --plan-service ADDR",
		Short: "Run the main job end to end on a fresh embedded store",
		Long: `Create a store, put files through the batch and the streaming paths, put a
tagged artifact, put again (idempotent), get everything back and compare, stat,
ask has, run a program and a WebAssembly operation, run the README's plan
walkthrough (fetch over HTTP, count words, post the count behind an approval
gate; the runner killed mid-call and resumed; a replay), and verify the
store — printing each step.

Without --dir everything happens in a temporary directory that is removed at
the end. With --dir DIR the store (DIR/store) and the input files (DIR/inputs)
are kept, so you can go on with, e.g., amduat --store DIR/store stat REF.
The demo ignores --store.

With --plan-service ADDR it runs no step: it serves the loopback service of
the README's plan walkthrough on ADDR until it is stopped, logging one line
per call: GET /doc.txt answers a 9-word document, except that the first
request of each Idempotency-Key stalls until its client goes away (so the
walkthrough can kill its runner mid-call); POST /count records its body,
once per key.`,
		Args: rangeArgs(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			if planService != "" {
				return servePlanDemo(c.Context(), a, planService)
			}
			kept := dir != ""
			if !kept {
				tmp, err := os.MkdirTemp("", "amduat-demo-*")
				if err != nil {
					return fail(exitIO, "", err)
				}
				defer os.RemoveAll(tmp)
				dir = tmp
			}
			e := &demoEnv{dir: dir, storeDir: filepath.Join(dir, "store"), inputDir: filepath.Join(dir, "inputs"),
				refs: map[string]asl.Reference{}}
			defer func() {
				if e.store != nil {
					e.store.Close()
				}
			}()
			res := demoResult{Dir: dir, Store: e.storeDir, Kept: kept, OK: true, Steps: []demoStepResult{}}
			where := "temporary, removed at the end"
			if kept {
				where = "kept"
			}
			a.printf("amduat demo: working in %s (%s)\n", dir, where)
			steps := sortedDemoSteps()
			var failure error
			for i, st := range steps {
				details, err := st.run(c.Context(), e)
				sr := demoStepResult{Name: st.name, OK: err == nil, Details: details}
				if sr.Details == nil {
					sr.Details = []string{}
				}
				status := "ok"
				if err != nil {
					sr.Error = oneLine(err.Error())
					status = "FAILED"
				}
				res.Steps = append(res.Steps, sr)
				a.printf("[%d/%d] %s: %s\n", i+1, len(steps), st.name, status)
				for _, d := range details {
					a.printf("      %s\n", d)
				}
				if err != nil {
					res.OK = false
					failure = err
					break
				}
			}
			if e.store != nil {
				err := e.store.Close()
				e.store = nil
				if err != nil && failure == nil {
					res.OK, failure = false, failAuto(e.storeDir, fmt.Errorf("closing store: %w", err))
				}
			}
			if a.jsonOut {
				if err := a.printJSON(res); err != nil {
					return err
				}
			}
			if failure != nil {
				if a.jsonOut {
					a.warnf("", failure)
					return exitStatus(demoExitCode(failure))
				}
				return failure
			}
			if kept {
				a.printf("demo: all %d steps ok; store kept at %s\n", len(steps), e.storeDir)
			} else {
				a.printf("demo: all %d steps ok; temporary directory removed\n", len(steps))
			}
			return nil
		},
	}
	c.Flags().StringVar(&dir, "dir", "", "keep the store and inputs in DIR (default: a temporary directory)")
	c.Flags().StringVar(&planService, "plan-service", "", "serve the plan walkthrough's loopback service on ADDR (host:port) and run no step")
	return c
}

func demoExitCode(err error) int {
	var ce *cliError
	if errors.As(err, &ce) {
		return ce.code
	}
	return classify(err)
}

func demoInit(_ context.Context, e *demoEnv) ([]string, error) {
	s, err := pebblestore.Create(e.storeDir, &pebblestore.Options{DefaultHash: asl.HashSHA256})
	if errors.Is(err, pebblestore.ErrExists) {
		return nil, fail(exitStore, e.storeDir, fmt.Errorf("a store exists here already (give --dir a new directory): %w", err))
	}
	if err != nil {
		return nil, failAuto(e.storeDir, err)
	}
	e.store = s
	return []string{fmt.Sprintf("created store %s (default hash %s)", e.storeDir, s.DefaultHash())}, nil
}

// demoBytes returns n deterministic, incompressible-looking bytes: SHA-256
// in counter mode over label.
func demoBytes(label string, n int) []byte {
	out := make([]byte, 0, n+sha256.Size)
	var ctr [8]byte
	for i := uint64(0); len(out) < n; i++ {
		binary.BigEndian.PutUint64(ctr[:], i)
		sum := sha256.Sum256(append([]byte(label), ctr[:]...))
		out = append(out, sum[:]...)
	}
	return out[:n]
}

func demoFiles() []struct {
	name string
	data []byte
} {
	text := bytes.Repeat([]byte("Artifacts are bytes plus an optional type tag; references are hashes of their canonical encoding.\n"), 60)
	big := append(demoBytes("amduat demo large", 4<<20), bytes.Repeat([]byte("streamed through Put with bounded memory\n"), (4<<20)/41+1)...)
	return []struct {
		name string
		data []byte
	}{
		{"hello.txt", []byte("hello, amduat\n")},
		{"empty.bin", nil},
		{"notes.txt", text},
		{"zeros.bin", make([]byte, 256<<10)},
		{"random.bin", demoBytes("amduat demo random", 100<<10)},
		{"large.bin", big},
	}
}

func demoWriteInputs(_ context.Context, e *demoEnv) ([]string, error) {
	if err := os.MkdirAll(e.inputDir, 0o755); err != nil {
		return nil, fail(exitIO, e.inputDir, err)
	}
	var out []string
	for _, f := range demoFiles() {
		p := filepath.Join(e.inputDir, f.name)
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			return nil, fail(exitIO, p, err)
		}
		e.inputs = append(e.inputs, demoInput{name: f.name, path: p})
		out = append(out, fmt.Sprintf("%-10s %9d bytes", f.name, len(f.data)))
	}
	return out, nil
}

// deriveFile computes a file's reference independently of the store.
func deriveFile(id asl.HashID, path string) (asl.Reference, error) {
	f, err := os.Open(path)
	if err != nil {
		return asl.Reference{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return asl.Reference{}, err
	}
	h, err := asl.NewHasher(id, asl.Header{Size: uint64(st.Size())})
	if err != nil {
		return asl.Reference{}, err
	}
	if _, err := io.Copy(h, f); err != nil {
		return asl.Reference{}, err
	}
	return h.Sum()
}

func (e *demoEnv) putInputs(ctx context.Context) ([]putItem, *putter, error) {
	var items []putItem
	p := &putter{store: e.store, hash: e.store.DefaultHash(), emit: func(it putItem) error {
		items = append(items, it)
		return nil
	}}
	for _, in := range e.inputs {
		if err := p.add(ctx, in.path); err != nil {
			return nil, nil, err
		}
	}
	if err := p.flush(ctx); err != nil {
		return nil, nil, err
	}
	if len(items) != len(e.inputs) {
		return nil, nil, fmt.Errorf("put returned %d references for %d inputs", len(items), len(e.inputs))
	}
	return items, p, nil
}

func demoPut(ctx context.Context, e *demoEnv) ([]string, error) {
	items, p, err := e.putInputs(ctx)
	if err != nil {
		return nil, err
	}
	out := []string{fmt.Sprintf("%d inputs: %d batch commit(s) for the small ones, %d streamed (over %d MiB)",
		len(items), p.batches, p.streamed, putStreamThreshold>>20)}
	for i, it := range items {
		want, err := deriveFile(e.store.DefaultHash(), e.inputs[i].path)
		if err != nil {
			return out, fail(exitIO, e.inputs[i].path, err)
		}
		if it.Ref != want {
			return out, fail(exitIntegrity, e.inputs[i].name, fmt.Errorf("store returned %s, derived %s: %w", it.Ref, want, asl.ErrIntegrity))
		}
		e.inputs[i].ref = it.Ref
		e.refs[e.inputs[i].name] = it.Ref
		how := "batch"
		if it.Streamed {
			how = "streamed"
		}
		out = append(out, fmt.Sprintf("%-10s -> %s (%s)", e.inputs[i].name, it.Ref, how))
	}
	out = append(out, "every reference equals the one derived independently from the file")
	return out, nil
}

func demoPutTagged(ctx context.Context, e *demoEnv) ([]string, error) {
	hello := []byte("hello, amduat\n")
	untagged, err := asl.PutArtifact(ctx, e.store, e.store.DefaultHash(), asl.Untagged(hello))
	if err != nil {
		return nil, failAuto("hello", err)
	}
	tagged, err := asl.PutArtifact(ctx, e.store, e.store.DefaultHash(), asl.Tagged(42, hello))
	if err != nil {
		return nil, failAuto("hello (tagged)", err)
	}
	if tagged == untagged {
		return nil, fmt.Errorf("tagged and untagged artifacts share reference %s", tagged)
	}
	e.refs["hello"], e.refs["hello-tagged"] = untagged, tagged
	return []string{
		"same bytes as hello.txt, with type tag 42 (0x0000002a):",
		fmt.Sprintf("untagged -> %s", untagged),
		fmt.Sprintf("tagged   -> %s", tagged),
		"the tag is part of the canonical encoding, so the references differ",
	}, nil
}

func demoPutAgain(ctx context.Context, e *demoEnv) ([]string, error) {
	items, _, err := e.putInputs(ctx)
	if err != nil {
		return nil, err
	}
	for i, it := range items {
		if it.Ref != e.inputs[i].ref {
			return nil, fmt.Errorf("%s: second put returned %s, first %s", e.inputs[i].name, it.Ref, e.inputs[i].ref)
		}
	}
	return []string{fmt.Sprintf("putting the %d inputs again returned the same %d references (puts are idempotent)", len(items), len(items))}, nil
}

func demoGet(ctx context.Context, e *demoEnv) ([]string, error) {
	var total int64
	for _, in := range e.inputs {
		want, err := os.ReadFile(in.path)
		if err != nil {
			return nil, fail(exitIO, in.path, err)
		}
		rc, hdr, err := e.store.Fetch(ctx, in.ref)
		if err != nil {
			return nil, failAuto(in.ref.String(), err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, failAuto(in.ref.String(), err)
		}
		if !bytes.Equal(got, want) || hdr.Size != uint64(len(want)) {
			return nil, fail(exitIntegrity, in.name, fmt.Errorf("bytes read back differ from the file: %w", asl.ErrIntegrity))
		}
		total += int64(len(got))
	}
	return []string{fmt.Sprintf("read back %d artifacts (%d bytes), verified while reading; all identical to the inputs", len(e.inputs), total)}, nil
}

func demoStat(ctx context.Context, e *demoEnv) ([]string, error) {
	var out []string
	for _, in := range e.inputs {
		info, err := e.store.Stat(ctx, in.ref)
		if err != nil {
			return out, failAuto(in.ref.String(), err)
		}
		out = append(out, fmt.Sprintf("%-10s size=%d stored_size=%d compression=%s type_tag=%s",
			in.name, info.Size, info.StoredSize, info.Compression, info.TagString()))
	}
	info, err := e.store.Stat(ctx, e.refs["hello-tagged"])
	if err != nil {
		return out, failAuto(e.refs["hello-tagged"].String(), err)
	}
	out = append(out, fmt.Sprintf("%-10s size=%d stored_size=%d compression=%s type_tag=%s",
		"tagged", info.Size, info.StoredSize, info.Compression, info.TagString()))
	return out, nil
}

func demoHas(ctx context.Context, e *demoEnv) ([]string, error) {
	for _, in := range e.inputs {
		ok, err := asl.Has(ctx, e.store, in.ref)
		if err != nil || !ok {
			return nil, fmt.Errorf("%s: has = %t, %v; want present", in.ref, ok, err)
		}
	}
	missing := asl.MustDerive(e.store.DefaultHash(), asl.Untagged([]byte("never stored")))
	ok, err := asl.Has(ctx, e.store, missing)
	if err != nil || ok {
		return nil, fmt.Errorf("%s: has = %t, %v; want missing", missing, ok, err)
	}
	return []string{
		fmt.Sprintf("all %d input references present", len(e.inputs)),
		fmt.Sprintf("%s missing (never stored), as expected", missing),
	}, nil
}

func demoVerify(ctx context.Context, e *demoEnv) ([]string, error) {
	rep, err := aslutil.Verify(ctx, e.store, aslutil.VerifyOptions{}, nil)
	if err != nil {
		return nil, failAuto(e.storeDir, err)
	}
	line := fmt.Sprintf("checked %d of %d artifacts (%d bytes): %d corrupt, %d failed",
		rep.Checked, rep.Stored, rep.Bytes, rep.IntegrityFailures(), len(rep.Failures)-rep.IntegrityFailures())
	if len(rep.Failures) > 0 {
		f := rep.Failures[0]
		return []string{line}, failAuto(f.Ref.String(), f.Err)
	}
	return []string{line}, nil
}
