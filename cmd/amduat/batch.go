package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
)

// maxLine bounds one line of a --stdin batch (a reference, a file name).
const maxLine = 1 << 20

// eachLine calls fn for every line of r with surrounding white space
// trimmed, skipping blank lines; memory is one line.
func eachLine(r io.Reader, fn func(line string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if err := fn(line); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fail(exitIO, "stdin", fmt.Errorf("reading: %w", err))
	}
	return nil
}

// batchState tracks the outcome of a batch mode: the first failure's exit
// code, which ends the command after every line was answered.
type batchState struct {
	a    *app
	code int
	w    *bufio.Writer
	enc  *json.Encoder
}

func (a *app) newBatch() *batchState {
	w := bufio.NewWriterSize(a.stdout, 64<<10)
	e := json.NewEncoder(w)
	e.SetEscapeHTML(false)
	return &batchState{a: a, w: w, enc: e}
}

// failed reports err on stderr (and, under --json, as a JSON line) and
// remembers its exit code; the batch goes on.
func (b *batchState) failed(subject string, err error) {
	code := b.a.exitCode(err)
	var ce *cliError
	if errors.As(err, &ce) && ce.subject == "" {
		err = fail(code, subject, ce.err)
	} else if !errors.As(err, &ce) {
		err = fail(code, subject, err)
	}
	b.w.Flush()
	msg := oneLine(err.Error())
	fmt.Fprintf(b.a.stderr, "amduat: %s: %s\n", b.a.cmdName, msg)
	if b.a.jsonOut {
		b.enc.Encode(struct {
			Ref   string `json:"ref"`
			Error string `json:"error"`
			Code  int    `json:"code"`
		}{subject, msg, code})
	}
	if b.code == 0 {
		b.code = code
	}
}

// line writes one text line (text mode) or one JSON object (JSON mode).
func (b *batchState) line(text string, obj any) error {
	var err error
	if b.a.jsonOut {
		err = b.enc.Encode(obj)
	} else {
		_, err = fmt.Fprintln(b.w, text)
	}
	if err != nil {
		return fail(exitIO, "stdout", err)
	}
	return nil
}

// negative remembers a negative answer (exit 1) unless a failure came first.
func (b *batchState) negative() {
	if b.code == 0 {
		b.code = exitNegative
	}
}

func (b *batchState) finish() error {
	if err := b.w.Flush(); err != nil {
		return fail(exitIO, "stdout", err)
	}
	if b.code != 0 {
		return exitStatus(b.code)
	}
	return nil
}

type refStore interface {
	asl.Statter
	asl.Enumerator
}

// stdinArgs is the argument check of commands with a --stdin batch mode:
// at least one argument without it, none with it.
func stdinArgs(stdin *bool) func(*cobra.Command, []string) error {
	return func(c *cobra.Command, args []string) error {
		if *stdin {
			if len(args) > 0 {
				return usagef("--stdin takes no arguments, got %d", len(args))
			}
			return nil
		}
		return minArgs(1)(c, args)
	}
}

// hasBatch is has --stdin.
func (a *app) hasBatch() (err error) {
	s, err := a.openStoreReadOnly()
	if err != nil {
		return err
	}
	defer closeStore(s, a.storeDir, &err)
	b := a.newBatch()
	err = eachLine(a.stdin, func(line string) error {
		if err := a.context().Err(); err != nil {
			return err
		}
		ref, err := a.parseRefIn(s, line)
		if err != nil {
			if errors.Is(err, asl.ErrNotFound) {
				b.negative()
				return b.line(line+" missing", hasItemText{line, false})
			}
			b.failed(line, err)
			return nil
		}
		ok, err := asl.Has(a.context(), s, ref)
		if err != nil {
			b.failed(line, refErr(line, err))
			return nil
		}
		state := "present"
		if !ok {
			state = "missing"
			b.negative()
		}
		return b.line(ref.String()+" "+state, hasItem{ref, ok})
	})
	if err != nil {
		b.w.Flush()
		return err
	}
	return b.finish()
}

type hasItemText struct {
	Ref     string `json:"ref"`
	Present bool   `json:"present"`
}

type statMissing struct {
	Ref     string `json:"ref"`
	Missing bool   `json:"missing"`
}

// statBatch is stat --stdin.
func (a *app) statBatch() (err error) {
	s, err := a.openStoreReadOnly()
	if err != nil {
		return err
	}
	defer closeStore(s, a.storeDir, &err)
	b := a.newBatch()
	missing := false
	err = eachLine(a.stdin, func(line string) error {
		if err := a.context().Err(); err != nil {
			return err
		}
		ref, err := a.parseRefIn(s, line)
		if err == nil {
			var in asl.Info
			if in, err = s.Stat(a.context(), ref); err == nil {
				in.Ref = ref
				return b.line(statLine(in), statItemOf(in))
			}
			line = ref.String()
			err = refErr(line, err)
		}
		if errors.Is(err, asl.ErrNotFound) && !errors.Is(err, asl.ErrIntegrity) {
			missing = true
			return b.line(line+" missing", statMissing{line, true})
		}
		b.failed(line, err)
		return nil
	})
	if err != nil {
		b.w.Flush()
		return err
	}
	if missing && b.code == 0 {
		b.code = exitNotFound
	}
	return b.finish()
}
