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
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/asl/s3store"
	"github.com/amduat/amduat/closure"
)

// app holds the global flags and the process's streams for one invocation.
type app struct {
	storeDir string
	jsonOut  bool
	caCert   string // --ca-cert: a PEM file trusted for https:// stores

	stdin          io.Reader
	stdout, stderr io.Writer

	// cmdName is the running command's path below the root ("put",
	// "conformance run"), used in error lines.
	cmdName string
	// started is set once flags and arguments have been accepted; an error
	// before that is a usage error.
	started bool
	// ctx is the running command's context, set before RunE.
	ctx context.Context
	// early is a store opened to resolve abbreviated references (refs.go),
	// handed to the command's openStore, closed by run if never taken.
	early backend
	// s3Cache carries serve's --cache-dir, --cache-size and memory cache to
	// openS3.
	s3Cache s3store.Options
	// s3Wait is --s3-wait (s3store.Options.ReachWait); s3WaitSet says
	// whether it was given (else AMDUAT_S3_WAIT, when set, is taken).
	s3Wait    time.Duration
	s3WaitSet bool
}

var commandFactories []func(*app) *cobra.Command

// addCommand registers a top-level command. Call it from init functions.
func addCommand(f func(*app) *cobra.Command) { commandFactories = append(commandFactories, f) }

// interruptGrace is how long a command may take to stop after SIGINT or
// SIGTERM before the process exits anyway, in nanoseconds (SPECS.md
// §16.2): a second, unless the command set its own (serve: its
// --shutdown-timeout plus serveCloseGrace, §18.8).
var interruptGrace atomic.Int64

func init() { interruptGrace.Store(int64(time.Second)) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The signal cancels the command's context; operations that watch it
	// return at once. Whatever does not (a file system or Pebble call that
	// blocks) must not keep the process alive: a second later it exits with
	// 130. Stores are crash-safe, so this loses nothing acknowledged.
	finished := make(chan struct{})
	go func() {
		<-ctx.Done()
		select {
		case <-finished: // stop below cancelled ctx: no signal came
			return
		default:
		}
		time.Sleep(time.Duration(interruptGrace.Load()))
		removeTemps()
		fmt.Fprintln(os.Stderr, "amduat: interrupted")
		os.Exit(exitInterrupted)
	}()
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	close(finished)
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
--store http://HOST:PORT (or https://) uses the store of a running
` + "`amduat serve`" + ` instead, with the bearer token in $AMDUAT_TOKEN: every
command works the same, every byte read is re-hashed by the client, and
pel run executes on the server.

With --json every command prints exactly one JSON object on stdout: its result,
or {"error":"...","code":N,"command":"..."} when it fails (the error line also
goes to stderr).

` + exitCodeHelp,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(c *cobra.Command, _ []string) error {
			a.started = true
			a.ctx = c.Context()
			a.s3WaitSet = c.Flags().Changed("s3-wait")
			if c.HasParent() {
				a.cmdName = strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" ")
			}
			return nil
		},
	}
	def := os.Getenv("AMDUAT_STORE")
	if def == "" {
		def = defaultStoreDir
	}
	root.PersistentFlags().StringVar(&a.storeDir, "store", def, "the store: a directory, http(s)://HOST:PORT or unix:///SOCKET of an amduat serve, or s3://BUCKET/PREFIX?… (env AMDUAT_STORE; token in AMDUAT_TOKEN)")
	root.PersistentFlags().BoolVar(&a.jsonOut, "json", false, "print one JSON object on stdout")
	root.PersistentFlags().DurationVar(&a.s3Wait, "s3-wait", s3store.DefaultReachWait, "on s3:// stores, how long requests wait for an object store that refuses connections (one restarting) before the command fails with exit 6 (env AMDUAT_S3_WAIT; 0s: not at all)")
	root.PersistentFlags().StringVar(&a.caCert, "ca-cert", os.Getenv("AMDUAT_CA_CERT"), "trust this PEM certificate (a self-signed server's, or its CA's) for https:// stores, besides the system's (env AMDUAT_CA_CERT)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr(flagValueErr(err)) })
	root.CompletionOptions.DisableDefaultCmd = true // completion.go defines it
	setVersionFlag(root)
	for _, f := range commandFactories {
		root.AddCommand(f(a))
	}
	completeHelp(a, root)
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	return root
}

// run executes one invocation and returns the process exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	// A panic on this goroutine is an internal failure (exit 8, SPECS.md
	// §16.2), never the runtime's exit 2, which means a usage error here.
	defer func() {
		if v := recover(); v != nil {
			fmt.Fprintf(stderr, "amduat: internal failure: %v\n", v)
			code = exitInternal
		}
	}()
	out := &stdoutWriter{w: stdout}
	a := &app{stdin: stdin, stdout: out, stderr: stderr}
	root := newRoot(a)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	var st exitStatus
	if (err == nil || errors.As(err, &st)) && out.err != nil {
		// A command that ignored a failed write (a full disk, say) has
		// not done its job: exit 6, as for any I/O error.
		err = fail(exitIO, "", fmt.Errorf("write standard output: %w", out.err))
	}
	if s := a.takeEarlyStore(); s != nil {
		s.Close()
	}
	if err == nil {
		return exitOK
	}
	if errors.As(err, &st) {
		return int(st)
	}
	code = a.exitCode(err)
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
	if code == exitInterrupted {
		msg = "interrupted"
	}
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

// stdoutWriter remembers the first error a write to standard output met.
type stdoutWriter struct {
	w   io.Writer
	err error
}

func (s *stdoutWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if err != nil && s.err == nil {
		s.err = err
	}
	return n, err
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

// backend is what commands need of a store: the asl.Store interfaces, the
// index capability, the hash for new puts, and Close. The embedded store
// and the HTTP client (SPECS.md §18) both provide it.
type backend interface {
	asl.Store
	asl.Indexer
	DefaultHash() asl.HashID
	Close() error
}

// isRemote reports whether a --store value names a server, not a directory.
func isRemote(store string) bool {
	return strings.HasPrefix(store, "http://") || strings.HasPrefix(store, "https://") || isUnixStore(store)
}

// isS3 reports whether a --store value names an S3 bucket (SPECS.md §6.7):
// s3://BUCKET[/PREFIX][?endpoint=…&region=…&insecure=1&path-style=1].
func isS3(store string) bool { return strings.HasPrefix(store, "s3://") }

// checkStoreValue rejects a --store value that looks like a URL but names
// no store amduat can open: an unknown scheme, an http(s) URL without a
// host, a malformed s3 URL. Each is a usage error (exit 2), not an I/O
// failure or a missing directory.
func checkStoreValue(s string) error {
	scheme, _, ok := strings.Cut(s, "://")
	if !ok || scheme == "" || strings.ContainsAny(scheme, "/\\.") {
		return nil // a directory
	}
	switch scheme {
	case "http", "https":
		if u, err := url.Parse(s); err != nil || u.Host == "" {
			return usagef("store %s: want %s://HOST:PORT of an amduat serve", s, scheme)
		}
	case "s3":
		if _, _, _, err := s3store.ParseURL(s); err != nil {
			return usageErr(err)
		}
	case "unix":
		if _, err := unixSocketPath(s); err != nil {
			return usageErr(err)
		}
	default:
		return usagef("store %s: unknown scheme %q: want a directory, http://, https://, unix:// or s3://", s, scheme)
	}
	return nil
}

// openS3 opens (or, for init, creates) the S3 store a --store URL names;
// credentials come from the standard AWS environment variables and files.
func (a *app) openS3(create bool, hash asl.HashID) (*s3store.Store, error) {
	if err := checkStoreValue(a.storeDir); err != nil {
		return nil, err
	}
	touch, err := touchAge()
	if err != nil {
		return nil, err
	}
	wait := a.s3Wait
	if !a.s3WaitSet {
		d, set, err := durationEnv("AMDUAT_S3_WAIT")
		if err != nil {
			return nil, err
		}
		if set {
			wait = d
		}
	}
	s, err := s3store.OpenURL(a.context(), a.storeDir, create, s3store.Options{Hash: hash, CacheDir: a.s3Cache.CacheDir, CacheSize: a.s3Cache.CacheSize, MemCacheSize: a.s3Cache.MemCacheSize, TouchAge: touch,
		ReachWait: reachWaitOption(wait), WaitLog: a.stderr})
	if errors.Is(err, s3store.ErrNoStore) {
		return nil, fail(exitStore, a.storeDir, fmt.Errorf("no store here (create one with `amduat init --store %s`): %w", a.storeDir, err))
	}
	if errors.Is(err, s3store.ErrExists) {
		return nil, fail(exitStore, a.storeDir, err)
	}
	if err != nil {
		return nil, failAuto(a.storeDir, err)
	}
	s.SetChildren(closure.ChildrenFunc(s)) // pins keep what they reach from a concurrent gc (SPECS.md §6.7)
	return s, nil
}

// openStore opens the store named by --store for writing: a server when it
// is an http(s) URL (token from AMDUAT_TOKEN), else a directory. A missing
// store is exit code 7 with a hint to run `amduat init`; a store held by
// another process (pebblestore.ErrLocked), or out of space (ErrNoSpace), is
// exit code 6 with a one-line hint (SPECS.md §6.6, §16.2).
func (a *app) openStore() (backend, error) {
	return a.open(nil)
}

// openStoreReadOnly opens the store named by --store read-only, for the
// commands that only read (get, has, stat, verify, pel show, prov why, prov
// uses): nothing in the store directory is created, changed, synced or
// locked, so they work on a read-only file system, on a full disk, beside
// each other and beside a writer (SPECS.md §6.6).
func (a *app) openStoreReadOnly() (backend, error) {
	return a.open(&pebblestore.Options{ReadOnly: true})
}

func (a *app) open(opts *pebblestore.Options) (backend, error) {
	readOnly := opts != nil && opts.ReadOnly
	if s := a.takeEarlyStore(); s != nil {
		// Abbreviated references were resolved on a read-only open; a
		// command that writes opens the store again for writing.
		if ps, ok := s.(*pebblestore.Store); !ok || !ps.ReadOnly() || readOnly {
			return s, nil
		}
		s.Close()
	}
	if err := checkStoreValue(a.storeDir); err != nil {
		return nil, err
	}
	if isRemote(a.storeDir) {
		return a.openRemote(a.storeDir)
	}
	if isS3(a.storeDir) {
		return a.openS3(false, 0)
	}
	if st, serr := os.Stat(a.storeDir); serr == nil && !st.IsDir() {
		return nil, fail(exitStore, a.storeDir, errors.New("is a file, not a store directory (create a store with `amduat init --store DIR`)"))
	}
	s, err := a.openPebble(opts)
	if errors.Is(err, pebblestore.ErrNoStore) {
		return nil, fail(exitStore, a.storeDir, &explained{"no store here (create one with `amduat init`, or point --store or AMDUAT_STORE at one)", pebblestore.ErrNoStore})
	}
	if err != nil {
		return nil, failAuto(a.storeDir, err)
	}
	return s, nil
}

// context is the running command's context.
func (a *app) context() context.Context {
	if a.ctx != nil {
		return a.ctx
	}
	return context.Background()
}

// closeStore closes s and turns a close failure into the command's error
// when the command itself succeeded.
func closeStore(s backend, dir string, err *error) {
	if cerr := s.Close(); cerr != nil && *err == nil {
		*err = failAuto(dir, fmt.Errorf("closing store: %w", cerr))
	}
}

// reachWaitOption maps --s3-wait to s3store.Options.ReachWait (0s: do not
// wait, which the option spells as a negative duration).
func reachWaitOption(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}
