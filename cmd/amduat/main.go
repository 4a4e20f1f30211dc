// Command amduat puts and gets artifacts by reference in an embedded store,
// verifies stores, and runs the conformance vectors (SPECS.md §16).
//
// Every command honours the global flags --store and --json. Commands are
// defined one per file and register themselves with addCommand from an init
// function, so a command group (for example `amduat pel`) is added in its own
// file without touching this one. A command reports failure by returning an
// error built with fail, failAuto or usagef; run turns it into one line on
// stderr (and, under --json, an error object on stdout) and an exit code
// from the table in exitcodes.go.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/amduat/amduat/asl/pebblestore"
)

// app holds the global flags and the process's streams for one invocation.
type app struct {
	storeDir string
	jsonOut  bool

	stdin          io.Reader
	stdout, stderr io.Writer

	// cmdName is the running command's path below the root ("put",
	// "conformance run"), used in error lines.
	cmdName string
	// started is set once flags and arguments have been accepted; an error
	// before that is a usage error.
	started bool
}

var commandFactories []func(*app) *cobra.Command

// addCommand registers a top-level command. Call it from init functions.
func addCommand(f func(*app) *cobra.Command) { commandFactories = append(commandFactories, f) }

// interruptGrace is how long a command may take to stop after SIGINT or
// SIGTERM before the process exits anyway (SPECS.md §16.2).
const interruptGrace = time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The signal cancels the command's context; operations that watch it
	// return at once. Whatever does not (a file system or Pebble call that
	// blocks) must not keep the process alive: a second later it exits with
	// 130. Stores are crash-safe, so this loses nothing acknowledged.
	go func() {
		<-ctx.Done()
		time.Sleep(interruptGrace)
		fmt.Fprintln(os.Stderr, "amduat: interrupted")
		os.Exit(exitInterrupted)
	}()
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// defaultStoreDir is the store used when neither --store nor AMDUAT_STORE
// is given.
const defaultStoreDir = ".amduat"

func newRoot(a *app) *cobra.Command {
	cobra.EnableTraverseRunHooks = true
	root := &cobra.Command{
		Use:   "amduat",
		Short: "Content-addressed artifact store and conformance tool (ASL/1, PEL/1)",
		Long: `amduat stores artifacts (bytes plus an optional 32-bit type tag) by reference
in an embedded store, gets them back verified, checks stores for corruption and
runs the language-neutral conformance vectors.

A reference is printed and parsed as lowercase hex of its ReferenceBytes, e.g.
00011f1d4ea728bc4c10bbc8211c7644aa950b6296c9b3e70d263e4ae6fc83e895e4.

The store is the directory given by --store, else $AMDUAT_STORE, else ./.amduat.

With --json every command prints exactly one JSON object on stdout: its result,
or {"error":"...","code":N,"command":"..."} when it fails (the error line also
goes to stderr).

` + exitCodeHelp,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(c *cobra.Command, _ []string) error {
			a.started = true
			a.cmdName = strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" ")
			return nil
		},
	}
	def := os.Getenv("AMDUAT_STORE")
	if def == "" {
		def = defaultStoreDir
	}
	root.PersistentFlags().StringVar(&a.storeDir, "store", def, "store directory (env AMDUAT_STORE)")
	root.PersistentFlags().BoolVar(&a.jsonOut, "json", false, "print one JSON object on stdout")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr(err) })
	root.CompletionOptions.DisableDefaultCmd = true
	for _, f := range commandFactories {
		root.AddCommand(f(a))
	}
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	return root
}

// run executes one invocation and returns the process exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr}
	root := newRoot(a)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var st exitStatus
	if errors.As(err, &st) {
		return int(st)
	}
	code := a.exitCode(err)
	if !a.jsonOut {
		// Flags may not have been parsed (unknown command): honour --json
		// as written.
		a.jsonOut = jsonRequested(args)
	}
	if a.cmdName == "" {
		// Parsing failed before a command ran: name the command that was
		// being parsed if cobra found one.
		if c, _, ferr := root.Find(args); ferr == nil && c != root {
			a.cmdName = strings.TrimPrefix(c.CommandPath(), "amduat ")
		}
	}
	msg := oneLine(err.Error())
	if a.cmdName != "" {
		msg = a.cmdName + ": " + msg
	}
	fmt.Fprintf(stderr, "amduat: %s\n", msg)
	if a.jsonOut {
		a.printJSON(struct {
			Error   string `json:"error"`
			Code    int    `json:"code"`
			Command string `json:"command"`
		}{msg, code, a.cmdName})
	}
	return code
}

func jsonRequested(args []string) bool {
	for _, s := range args {
		switch s {
		case "--":
			return false
		case "--json", "--json=true":
			return true
		}
	}
	return false
}

func (a *app) exitCode(err error) int {
	var ce *cliError
	if errors.As(err, &ce) {
		return ce.code
	}
	if !a.started {
		return exitUsage
	}
	return classify(err)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// printJSON writes v as one line of JSON on stdout.
func (a *app) printJSON(v any) error {
	e := json.NewEncoder(a.stdout)
	e.SetEscapeHTML(false)
	return e.Encode(v)
}

// printf writes human output on stdout; it is silent under --json.
func (a *app) printf(format string, args ...any) {
	if !a.jsonOut {
		fmt.Fprintf(a.stdout, format, args...)
	}
}

// warnf writes one diagnostic line on stderr, in the error-line format.
func (a *app) warnf(subject string, err error) {
	fmt.Fprintf(a.stderr, "amduat: %s: %s\n", a.cmdName, oneLine(withSubject(subject, err)))
}

// stderrIsTerminal reports whether progress output may be drawn.
func (a *app) stderrIsTerminal() bool {
	f, ok := a.stderr.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// openStore opens the store named by --store for writing. A missing store
// is exit code 7 with a hint to run `amduat init`; a store held by another
// process (pebblestore.ErrLocked), or out of space (ErrNoSpace), is exit
// code 6 with a one-line hint (SPECS.md §6.6, §16.2).
func (a *app) openStore() (*pebblestore.Store, error) {
	return a.open(nil)
}

// openStoreReadOnly opens the store named by --store read-only, for the
// commands that only read (get, has, stat, verify, pel show, prov why, prov
// uses): nothing in the store directory is created, changed, synced or
// locked, so they work on a read-only file system, on a full disk, beside
// each other and beside a writer (SPECS.md §6.6).
func (a *app) openStoreReadOnly() (*pebblestore.Store, error) {
	return a.open(&pebblestore.Options{ReadOnly: true})
}

func (a *app) open(opts *pebblestore.Options) (*pebblestore.Store, error) {
	s, err := pebblestore.Open(a.storeDir, opts)
	if errors.Is(err, pebblestore.ErrNoStore) {
		return nil, fail(exitStore, a.storeDir, fmt.Errorf("no store here (create one with `amduat init`, or point --store or AMDUAT_STORE at one): %w", pebblestore.ErrNoStore))
	}
	if err != nil {
		return nil, failAuto(a.storeDir, err)
	}
	return s, nil
}

// closeStore closes s and turns a close failure into the command's error
// when the command itself succeeded.
func closeStore(s *pebblestore.Store, dir string, err *error) {
	if cerr := s.Close(); cerr != nil && *err == nil {
		*err = failAuto(dir, fmt.Errorf("closing store: %w", cerr))
	}
}
