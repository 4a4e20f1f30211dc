// Package extfx runs effects in other processes, in any language, through
// the executor protocol amduat-executor/1 (SPECS.md §23.5): the policy
// names an executor and the command that runs it; amduat starts it, and the
// two exchange one JSON object per line on the executor's standard input
// and output, as git's credential helpers do: a hello each way (protocol,
// name, version), then one call frame per attempt answered by one result or
// error frame.
//
// Inputs and outputs travel inside the frames as base64, not as paths to
// temporary files: the executor needs no file system shared with amduat
// (it may run in a container, or behind ssh), there is no directory to
// clean or path to validate, and the policy's max_frame_bytes bounds the
// memory both sides spend on one call. Effects whose artifacts are larger
// than a frame belong to the exec effect, which passes files.
//
// A process that breaks the protocol (a line that is not a frame, a frame
// longer than the limit, a wrong id, an exit or a silence past the time
// limit) is killed and started again at the next call; the attempt fails
// with class executor_fault, or, when the call had been written, as an
// unknown outcome (effect.UnknownError), since the executor may have acted
// on it.
package extfx

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"sync"
	"time"

	"github.com/amduat/amduat/plan/effect"
	"github.com/amduat/amduat/plan/effect/internal/fxutil"
	"github.com/amduat/amduat/plan/effect/policy"
)

// stderrTail is how much of an executor's standard error is kept for
// messages.
const stderrTail = 2048

// Executor runs one policy-named external executor. Calls are serialized:
// one process answers one call at a time.
type Executor struct {
	cfg policy.Executor

	mu     sync.Mutex
	proc   *process
	hello  *Frame
	nextID uint64
}

// New returns the executor that pol's entry cfg describes. The process is
// started at the first call (or the first Version).
func New(cfg policy.Executor) *Executor { return &Executor{cfg: cfg} }

// Name is the policy's name for the executor: the effect kind it performs.
func (x *Executor) Name() string { return x.cfg.Name }

// HonoursKeys is the policy entry's honours_keys.
func (x *Executor) HonoursKeys() bool { return x.cfg.HonoursKeys }

var _ effect.KeyHonouring = (*Executor)(nil)

// Version is "<name> <version>" from the executor's hello, starting the
// process if it is not running; "unavailable: <reason>" when it cannot be
// started.
func (x *Executor) Version() string {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.start(context.Background()); err != nil {
		return "unavailable: " + err.Error()
	}
	return x.hello.Name + " " + x.hello.Version
}

// Close stops the process, if any.
func (x *Executor) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.stop()
	return nil
}

// process is one running executor.
type process struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan lineOrErr
	quit   chan struct{} // closed to release the reader
	exited chan struct{} // closed when Wait has returned
	stderr *tail
}

type lineOrErr struct {
	line []byte
	err  error
}

// tail keeps the last bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > stderrTail {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-stderrTail:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.buf))
}

func (x *Executor) fault(format string, args ...any) *effect.Error {
	return x.faultOf(x.proc, format, args...)
}

// faultOf is fault with the standard error of p (none when p is nil).
func (x *Executor) faultOf(p *process, format string, args ...any) *effect.Error {
	msg := fmt.Sprintf("executor %s: ", x.cfg.Name) + fmt.Sprintf(format, args...)
	if p != nil {
		if s := p.stderr.String(); s != "" {
			msg += " (stderr: " + s + ")"
		}
	}
	return &effect.Error{Class: effect.ExecutorFault, Msg: msg}
}

// stop kills the process group and forgets the process.
func (x *Executor) stop() {
	p := x.proc
	if p == nil {
		return
	}
	x.proc, x.hello = nil, nil
	p.stdin.Close()
	fxutil.KillGroup(p.cmd)
	close(p.quit)
	<-p.exited
}

// start runs the process and exchanges hellos, unless it is running.
func (x *Executor) start(ctx context.Context) error {
	if x.proc != nil {
		select {
		case <-x.proc.exited:
			x.stop() // it died since the last call: start again
		default:
			return nil
		}
	}
	cmd := exec.Command(x.cfg.Path, x.cfg.Args...)
	cmd.Env = []string{}
	for _, name := range x.cfg.PassEnv {
		if v, ok := os.LookupEnv(name); ok {
			cmd.Env = append(cmd.Env, name+"="+v)
		}
	}
	fxutil.NewProcessGroup(cmd)
	cmd.WaitDelay = time.Second
	p := &process{cmd: cmd, lines: make(chan lineOrErr), quit: make(chan struct{}), exited: make(chan struct{}), stderr: &tail{}}
	cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return x.fault("%v", err)
	}
	// Our own pipe, not StdoutPipe: Wait must not close the read end
	// before the last line written is read.
	stdout, w, err := os.Pipe()
	if err != nil {
		return x.fault("%v", err)
	}
	cmd.Stdout = w
	err = cmd.Start()
	w.Close()
	if err != nil {
		stdout.Close()
		return x.fault("cannot start %s: %v", x.cfg.Path, err)
	}
	go func() {
		defer stdout.Close()
		r := bufio.NewReaderSize(stdout, 64<<10)
		for {
			line, err := ReadLine(r, int(x.cfg.MaxFrameBytes))
			select {
			case p.lines <- lineOrErr{line, err}:
			case <-p.quit:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		cmd.Wait()
		close(p.exited)
	}()
	x.proc = p
	x.nextID = 0

	hctx, cancel := context.WithTimeout(ctx, time.Duration(x.cfg.StartTimeoutMillis)*time.Millisecond)
	defer cancel()
	hello, err := json.Marshal(&Frame{Type: TypeHello, Protocol: Protocol, Executor: x.cfg.Name})
	if err != nil {
		return err
	}
	if err := x.send(hctx, hello); err != nil {
		e := x.fault("hello: %v", err)
		x.stop()
		return e
	}
	line, err := x.receive(hctx)
	if err != nil {
		e := x.fault("hello: %v", err)
		x.stop()
		return e
	}
	f, err := DecodeReply(line, 0)
	if err == nil && f.Type != TypeHello {
		err = violation("a %q frame where a hello was due", f.Type)
	}
	if err != nil {
		e := x.fault("hello: %v", err)
		x.stop()
		return e
	}
	x.hello = f
	return nil
}

// send writes one line, giving up when ctx ends or the process exits.
func (x *Executor) send(ctx context.Context, line []byte) error {
	p := x.proc
	done := make(chan error, 1)
	go func() {
		_, err := p.stdin.Write(append(line, '\n'))
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		// The write may still block: killing the process releases it.
		fxutil.KillGroup(p.cmd)
		return fmt.Errorf("writing a frame: %w", ctx.Err())
	case <-p.exited:
		return errors.New("the process exited")
	}
}

// receive reads one line, giving up when ctx ends or the process exits.
func (x *Executor) receive(ctx context.Context) ([]byte, error) {
	p := x.proc
	select {
	case l := <-p.lines:
		if errors.Is(l.err, io.EOF) {
			return nil, errors.New("the process closed its output")
		}
		return l.line, l.err
	case <-ctx.Done():
		return nil, fmt.Errorf("no answer: %w", ctx.Err())
	case <-p.exited:
		// A line written before the exit is still an answer: read on
		// until the end of the pipe, which the group's death brings.
		fxutil.KillGroup(p.cmd)
		select {
		case l := <-p.lines:
			if l.err == nil {
				return l.line, nil
			}
		case <-ctx.Done():
		}
		return nil, fmt.Errorf("the process exited (%v)", p.cmd.ProcessState)
	}
}

// Call sends one call frame and waits for its answer (§23.5.3).
func (x *Executor) Call(ctx context.Context, st effect.Store, req effect.Request) (obs effect.Observation, err error) {
	obs.Start = time.Now()
	defer func() { obs.End = time.Now() }()
	x.mu.Lock()
	defer x.mu.Unlock()

	params := json.RawMessage(req.Params)
	if len(bytes.TrimSpace(params)) == 0 {
		params = json.RawMessage("{}")
	}
	if !json.Valid(params) || bytes.TrimSpace(params)[0] != '{' {
		return obs, fxutil.Invalid("executor %s: params are not a JSON object", x.cfg.Name)
	}
	limit := time.Duration(x.cfg.TimeoutMillis) * time.Millisecond
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < limit {
		limit = time.Until(dl)
	}
	call := &Frame{Type: TypeCall, Kind: x.cfg.Name, Params: params, Key: req.Key, Attempt: req.Attempt,
		TimeoutMillis: max(limit.Milliseconds(), 1), Inputs: []Blob{}}
	// Inputs, bounded before they are read: base64 takes 4 bytes per 3.
	budget := x.cfg.MaxFrameBytes
	for _, in := range req.Inputs {
		b, err := readInput(ctx, st, in, budget)
		if err != nil {
			return obs, err
		}
		budget -= int64(len(b)+2)/3*4 + int64(len(in.Name)) + 100
		call.Inputs = append(call.Inputs, Blob{Name: in.Name, Ref: in.Ref.String(), Data: b})
	}
	if err := x.start(ctx); err != nil {
		return obs, err
	}
	x.nextID++
	call.ID = x.nextID
	line, err := json.Marshal(call)
	if err != nil {
		return obs, fmt.Errorf("executor %s: encoding the call: %w", x.cfg.Name, err)
	}
	if int64(len(line)) > x.cfg.MaxFrameBytes {
		return obs, &effect.Error{Class: effect.LimitExceeded, Msg: fmt.Sprintf("executor %s: the call frame has %d bytes, more than max_frame_bytes %d", x.cfg.Name, len(line), x.cfg.MaxFrameBytes)}
	}
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	// From here on the executor may act on the call: every failure is an
	// unknown outcome as well as what it is.
	unknown := func(class effect.ErrorClass, err error) error {
		// Stopped first: stop waits for the process, and so for the last
		// of its standard error (a crash's own words come after the end
		// of its output).
		p := x.proc
		x.stop()
		e := x.faultOf(p, "%v", err)
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w (%w)", e.Msg, ctx.Err(), effect.ErrUnknownOutcome)
		}
		return effect.Unknown(class, e.Msg)
	}
	if err := x.send(cctx, line); err != nil {
		if cctx.Err() != nil {
			return obs, unknown(effect.NetworkTimeout, err)
		}
		return obs, unknown(effect.ExecutorFault, err)
	}
	answer, err := x.receive(cctx)
	if err != nil {
		if cctx.Err() != nil {
			return obs, unknown(effect.NetworkTimeout, fmt.Errorf("call %d: %w after %v", call.ID, err, limit))
		}
		return obs, unknown(effect.ExecutorFault, fmt.Errorf("call %d: %w", call.ID, err))
	}
	f, err := DecodeReply(answer, call.ID)
	if err == nil && f.Type == TypeHello {
		err = violation("a hello where an answer to call %d was due", call.ID)
	}
	if err != nil {
		return obs, unknown(effect.ExecutorFault, fmt.Errorf("call %d: %w", call.ID, err))
	}
	if f.Type == TypeError {
		msg := fmt.Sprintf("executor %s: %s", x.cfg.Name, f.Message)
		if f.Class == ClassUnknownOutcome {
			return obs, fmt.Errorf("%s: %w", msg, effect.ErrUnknownOutcome)
		}
		c, _ := ParseClass(f.Class)
		// The error frame itself is the observation (SPECS.md §23.5): the
		// receipt names it, so a person sees what the executor said.
		if ref, err := fxutil.PutBytes(ctx, st, answer); err == nil {
			obs.Outputs = []effect.Output{{Name: "error", Ref: ref}}
		} else {
			msg += fmt.Sprintf(" (storing the error frame: %v)", err)
		}
		return obs, &effect.Error{Class: c, Msg: msg, RetryAfter: time.Duration(f.RetryAfterMillis) * time.Millisecond}
	}
	sort.Slice(f.Outputs, func(i, j int) bool { return f.Outputs[i].Name < f.Outputs[j].Name })
	for _, o := range f.Outputs {
		ref, err := fxutil.PutBytes(ctx, st, o.Data)
		if err != nil {
			return obs, fmt.Errorf("executor %s: storing output %q: %w (%w)", x.cfg.Name, o.Name, err, effect.ErrUnknownOutcome)
		}
		obs.Outputs = append(obs.Outputs, effect.Output{Name: o.Name, Ref: ref})
	}
	return obs, nil
}

func readInput(ctx context.Context, st effect.Store, in effect.Input, budget int64) ([]byte, error) {
	rc, hdr, err := st.Fetch(ctx, in.Ref)
	if err != nil {
		return nil, &effect.Error{Class: effect.DependencyUnavailable, Msg: fmt.Sprintf("input %q (%s): %v", in.Name, in.Ref, err)}
	}
	defer rc.Close()
	if budget <= 0 || (hdr.Size+2)/3*4 > uint64(budget) {
		return nil, &effect.Error{Class: effect.LimitExceeded, Msg: fmt.Sprintf("input %q (%s) of %d bytes does not fit in max_frame_bytes", in.Name, in.Ref, hdr.Size)}
	}
	b := make([]byte, hdr.Size)
	if _, err := io.ReadFull(rc, b); err != nil {
		return nil, fmt.Errorf("input %q (%s): %w", in.Name, in.Ref, err)
	}
	return b, nil
}
