// Package execfx is the built-in exec effect (SPECS.md §23.3): one run of a
// command the policy allows, with no shell between the plan and the
// command, an empty environment except the variables the policy names, the
// inputs as files in a fresh temporary working directory, and the exit
// status, standard output, standard error and named output files stored as
// artifacts. The working directory is removed whatever happens.
package execfx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/plan/effect"
	"github.com/amduat/amduat/plan/effect/internal/fxutil"
	"github.com/amduat/amduat/plan/effect/policy"
)

// Kind is the effect kind of this executor.
const Kind = "exec"

// Version is recorded in every receipt of this executor.
const Version = "amduat-execfx/1"

// waitDelay bounds how long Wait waits for output pipes that a killed
// command's descendants may still hold.
const waitDelay = 2 * time.Second

// Params are the exec effect's params (§23.3).
type Params struct {
	// Command is the name of an exec.commands entry of the policy.
	Command string   `json:"command"`
	Args    []string `json:"args,omitempty"`
	// Env sets variables the policy's entry lists in env.
	Env map[string]string `json:"env,omitempty"`
	// Stdin names the input fed to standard input; empty: none.
	Stdin string `json:"stdin,omitempty"`
	// Outputs are file names collected from the working directory after a
	// zero exit status.
	Outputs []string `json:"outputs,omitempty"`
	// RetryExitCodes are nonzero exit statuses that mean "try again later"
	// (provider_unavailable); any other nonzero status is invalid_input.
	RetryExitCodes []int `json:"retry_exit_codes,omitempty"`
	// TimeoutMillis may lower, never raise, the policy's time limit.
	TimeoutMillis int64 `json:"timeout_ms,omitempty"`
}

// Executor performs exec effects under a policy.
type Executor struct {
	pol *policy.Policy
	// TempDir is where working directories are made; empty: os.TempDir().
	TempDir string
}

// New returns the exec executor under pol.
func New(pol *policy.Policy) *Executor { return &Executor{pol: pol} }

func (x *Executor) Name() string    { return Kind }
func (x *Executor) Version() string { return Version }

// HonoursKeys is false: a command receives the key (AMDUAT_IDEMPOTENCY_KEY)
// but nothing says it deduplicates by it.
func (x *Executor) HonoursKeys() bool { return false }

var _ effect.KeyHonouring = (*Executor)(nil)

// reserved output names: the executor's own outputs.
var reserved = map[string]bool{"exit": true, "stdout": true, "stderr": true}

func (x *Executor) parse(req effect.Request) (Params, *policy.Command, error) {
	var p Params
	if err := fxutil.DecodeParams(Kind, req.Params, &p); err != nil {
		return p, nil, err
	}
	cmd, err := x.pol.Command(p.Command)
	if err != nil {
		return p, nil, &effect.Error{Class: effect.PolicyDenied, Msg: err.Error()}
	}
	for i, a := range p.Args {
		if containsNUL(a) {
			return p, nil, fxutil.Invalid("exec params: args[%d] holds NUL", i)
		}
	}
	for name, v := range p.Env {
		if !contains(cmd.Env, name) {
			return p, nil, &effect.Error{Class: effect.PolicyDenied, Msg: fmt.Sprintf("exec params: env: the policy's entry for %q does not let a plan set %q", p.Command, name)}
		}
		if containsNUL(v) {
			return p, nil, fxutil.Invalid("exec params: env %q holds NUL", name)
		}
	}
	for _, in := range req.Inputs {
		if err := fxutil.CheckFileName(in.Name); err != nil {
			return p, nil, fxutil.Invalid("exec: input: %v", err)
		}
	}
	if p.Stdin != "" {
		if _, ok := fxutil.FindInput(req, p.Stdin); !ok {
			return p, nil, fxutil.Invalid("exec params: stdin: no input named %q", p.Stdin)
		}
	}
	for i, o := range p.Outputs {
		if err := fxutil.CheckFileName(o); err != nil {
			return p, nil, fxutil.Invalid("exec params: outputs[%d]: %v", i, err)
		}
		if reserved[o] {
			return p, nil, fxutil.Invalid("exec params: outputs[%d]: %q is the name of an output of its own", i, o)
		}
		if contains(p.Outputs[:i], o) {
			return p, nil, fxutil.Invalid("exec params: outputs[%d]: %q twice", i, o)
		}
	}
	for i, c := range p.RetryExitCodes {
		if c < 1 || c > 255 {
			return p, nil, fxutil.Invalid("exec params: retry_exit_codes[%d]: %d is not 1-255", i, c)
		}
	}
	if p.TimeoutMillis < 0 {
		return p, nil, fxutil.Invalid("exec params: timeout_ms: %d is negative", p.TimeoutMillis)
	}
	if containsNUL(req.Key) {
		return p, nil, fxutil.Invalid("exec: idempotency key holds NUL")
	}
	return p, cmd, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func containsNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return true
		}
	}
	return false
}

// environ builds the command's environment: the policy's pass_env variables
// that are set here, the params' env, and the request's key and attempt.
func environ(cmd *policy.Command, p Params, req effect.Request) []string {
	env := []string{}
	for _, name := range cmd.PassEnv {
		if v, ok := os.LookupEnv(name); ok {
			if _, set := p.Env[name]; !set {
				env = append(env, name+"="+v)
			}
		}
	}
	for _, name := range cmd.Env {
		if v, ok := p.Env[name]; ok {
			env = append(env, name+"="+v)
		}
	}
	return append(env, "AMDUAT_IDEMPOTENCY_KEY="+req.Key, "AMDUAT_ATTEMPT="+strconv.FormatUint(uint64(req.Attempt), 10))
}

// limitWriter writes at most limit bytes to f; the first write past it
// calls over and fails.
type limitWriter struct {
	f     *os.File
	n     int64
	limit int64
	over  func()
}

func (w *limitWriter) Write(p []byte) (int, error) {
	if w.n+int64(len(p)) > w.limit {
		w.over()
		return 0, fxutil.ErrLimit
	}
	n, err := w.f.Write(p)
	w.n += int64(n)
	return n, err
}

// Call runs the command once. Its outputs are "exit" (the exit status in
// decimal), "stdout", "stderr" and, after a zero exit status, every file
// the params name (§23.3).
func (x *Executor) Call(ctx context.Context, st effect.Store, req effect.Request) (obs effect.Observation, err error) {
	obs.Start = time.Now()
	defer func() { obs.End = time.Now() }()
	p, cmdPol, err := x.parse(req)
	if err != nil {
		return obs, err
	}
	root, err := os.MkdirTemp(x.TempDir, "amduat-exec-*")
	if err != nil {
		return obs, fmt.Errorf("exec: working directory: %w", err)
	}
	defer removeAll(root)
	work := filepath.Join(root, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		return obs, fmt.Errorf("exec: working directory: %w", err)
	}
	for _, in := range req.Inputs {
		if err := writeInput(ctx, st, filepath.Join(work, in.Name), in); err != nil {
			return obs, err
		}
	}

	limit := time.Duration(cmdPol.TimeoutMillis) * time.Millisecond
	if p.TimeoutMillis > 0 && time.Duration(p.TimeoutMillis)*time.Millisecond < limit {
		limit = time.Duration(p.TimeoutMillis) * time.Millisecond
	}
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(cctx, cmdPol.Path, p.Args...)
	cmd.Args[0] = filepath.Base(cmdPol.Path)
	cmd.Dir = work
	cmd.Env = environ(cmdPol, p, req)
	fxutil.NewProcessGroup(cmd)
	cmd.Cancel = func() error { return fxutil.KillGroup(cmd) }
	cmd.WaitDelay = waitDelay
	if p.Stdin != "" {
		in, _ := fxutil.FindInput(req, p.Stdin)
		f, err := os.Open(filepath.Join(work, in.Name))
		if err != nil {
			return obs, fmt.Errorf("exec: stdin: %w", err)
		}
		defer f.Close()
		cmd.Stdin = f
	}
	var overOnce sync.Once
	var overflowed bool
	over := func() {
		overOnce.Do(func() {
			overflowed = true
			fxutil.KillGroup(cmd)
		})
	}
	streams := map[string]*limitWriter{}
	for _, name := range []string{"stdout", "stderr"} {
		f, err := os.Create(filepath.Join(root, name))
		if err != nil {
			return obs, fmt.Errorf("exec: %s: %w", name, err)
		}
		defer f.Close()
		streams[name] = &limitWriter{f: f, limit: cmdPol.MaxOutputBytes, over: over}
	}
	cmd.Stdout, cmd.Stderr = streams["stdout"], streams["stderr"]

	if err := cmd.Start(); err != nil {
		return obs, &effect.Error{Class: effect.DependencyUnavailable, Msg: fmt.Sprintf("exec %s: cannot start %s: %v", p.Command, cmdPol.Path, err)}
	}
	waitErr := cmd.Wait()
	fxutil.KillGroup(cmd) // whatever the command left running in its group
	timedOut := cctx.Err() != nil && ctx.Err() == nil
	switch {
	case ctx.Err() != nil:
		return obs, fmt.Errorf("exec %s: stopped while running: %w (%w)", p.Command, ctx.Err(), effect.ErrUnknownOutcome)
	case overflowed:
		return obs, &effect.Error{Class: effect.LimitExceeded, Msg: fmt.Sprintf("exec %s: output longer than the policy's max_output_bytes %d", p.Command, cmdPol.MaxOutputBytes)}
	case timedOut:
		return obs, &effect.Error{Class: effect.LimitExceeded, Msg: fmt.Sprintf("exec %s: killed after the time limit of %v", p.Command, limit)}
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		return obs, &effect.Error{Class: effect.ExecutorFault, Msg: fmt.Sprintf("exec %s: %v", p.Command, waitErr)}
	}
	status := cmd.ProcessState.ExitCode()
	exitText := strconv.Itoa(status)
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		exitText = "signal " + strconv.Itoa(int(ws.Signal()))
	}
	outs := []effect.Output{}
	put := func(name string, b []byte) error {
		ref, err := fxutil.PutBytes(ctx, st, b)
		if err != nil {
			return fmt.Errorf("exec %s: storing %s: %w", p.Command, name, err)
		}
		outs = append(outs, effect.Output{Name: name, Ref: ref})
		return nil
	}
	if err := put("exit", []byte(exitText)); err != nil {
		return obs, err
	}
	for _, name := range []string{"stderr", "stdout"} {
		ref, err := storeFile(ctx, st, filepath.Join(root, name), cmdPol.MaxOutputBytes)
		if err != nil {
			return obs, fmt.Errorf("exec %s: storing %s: %w", p.Command, name, err)
		}
		outs = append(outs, effect.Output{Name: name, Ref: ref})
	}
	if status != 0 {
		obs.Outputs = sortOutputs(outs)
		msg := fmt.Sprintf("exec %s: exit status %s", p.Command, exitText)
		switch {
		case status < 0:
			return obs, &effect.Error{Class: effect.ExecutorFault, Msg: msg}
		case containsInt(p.RetryExitCodes, status):
			return obs, &effect.Error{Class: effect.ProviderUnavailable, Msg: msg}
		}
		return obs, &effect.Error{Class: effect.InvalidInput, Msg: msg}
	}
	for _, name := range p.Outputs {
		ref, err := storeFile(ctx, st, filepath.Join(work, name), cmdPol.MaxOutputBytes)
		if err != nil {
			obs.Outputs = sortOutputs(outs)
			var e *effect.Error
			if errors.As(err, &e) {
				e.Msg = fmt.Sprintf("exec %s: output %q: %s", p.Command, name, e.Msg)
				return obs, e
			}
			return obs, fmt.Errorf("exec %s: output %q: %w", p.Command, name, err)
		}
		outs = append(outs, effect.Output{Name: name, Ref: ref})
	}
	obs.Outputs = sortOutputs(outs)
	return obs, nil
}

func containsInt(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func sortOutputs(outs []effect.Output) []effect.Output {
	for i := 1; i < len(outs); i++ {
		for j := i; j > 0 && outs[j].Name < outs[j-1].Name; j-- {
			outs[j], outs[j-1] = outs[j-1], outs[j]
		}
	}
	return outs
}

func writeInput(ctx context.Context, st effect.Store, path string, in effect.Input) error {
	rc, _, err := st.Fetch(ctx, in.Ref)
	if err != nil {
		return &effect.Error{Class: effect.DependencyUnavailable, Msg: fmt.Sprintf("exec: input %q (%s): %v", in.Name, in.Ref, err)}
	}
	defer rc.Close()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("exec: input %q: %w", in.Name, err)
	}
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		return fmt.Errorf("exec: input %q (%s): %w", in.Name, in.Ref, err)
	}
	return f.Close()
}

// storeFile stores a regular file that the command left, refusing a
// symbolic link (it could point anywhere), anything that is not a regular
// file, and a file longer than limit.
func storeFile(ctx context.Context, st effect.Store, path string, limit int64) (ref asl.Reference, err error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return ref, fxutil.Invalid("the command did not write it")
	}
	if err != nil {
		return ref, err
	}
	if !fi.Mode().IsRegular() {
		return ref, fxutil.Invalid("not a regular file (%v)", fi.Mode().Type())
	}
	f, err := os.OpenFile(path, os.O_RDONLY|fxutil.NoFollow, 0)
	if err != nil {
		return ref, err
	}
	defer f.Close()
	ref, _, err = fxutil.Spool(ctx, st, f, limit)
	if errors.Is(err, fxutil.ErrLimit) {
		return ref, &effect.Error{Class: effect.LimitExceeded, Msg: fmt.Sprintf("longer than the policy's max_output_bytes %d", limit)}
	}
	return ref, err
}

// removeAll removes the working directory even where the command took away
// its own write or search permission on a directory inside it.
func removeAll(root string) {
	filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			os.Chmod(path, 0o700)
		}
		return nil
	})
	if os.RemoveAll(root) != nil {
		// A directory made unreadable before the walk reached it: one
		// more pass now that its parents are open.
		filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if d != nil && d.IsDir() {
				os.Chmod(path, 0o700)
			}
			return nil
		})
		os.RemoveAll(root)
	}
}
