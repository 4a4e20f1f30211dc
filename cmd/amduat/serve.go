package main

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/net/netutil"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/asl/s3store"
	"github.com/amduat/amduat/plan"
	"github.com/amduat/amduat/server"
)

// serveCloseGrace is how long serve may take, after its requests ended,
// to close the plan workers and the store (Pebble waits for the flushes
// and compactions in progress) before the process exits with 130.
const serveCloseGrace = 30 * time.Second

func init() { addCommand(newServeCmd) }

// serveJSON is the object `serve --json` prints once it listens.
type serveJSON struct {
	Store  string `json:"store"`
	URL    string `json:"url"`
	Listen string `json:"listen"`
	Auth   bool   `json:"auth"`
	TLS    bool   `json:"tls"`
}

func newServeCmd(a *app) *cobra.Command {
	var (
		listen, unixPath, authFile, tlsCert, tlsKey, logFormat string
		insecure                                               bool
		limits                                                 server.Limits
		maxConns                                               int
		headerTimeout, shutdownTimeout                         time.Duration
		cacheDir, cacheSize                                    string
		memTable, blockCache, writeBuffer                      uint64
		planPolicy                                             string
		planWorkers                                            int
		planLease, planRescan                                  time.Duration
	)
	c := &cobra.Command{
		Use:   "serve [--listen ADDR | --unix PATH] [--auth-file FILE] [--cache-dir DIR [--cache-size N]]",
		Short: "Serve the store and the surface over HTTP (API v1)",
		Long: `Serve the store in --store to many clients over HTTP API v1 (SPECS.md §18):
artifacts (put, batch put, missing, get with Range, stat, list), program
build, run and replay, pel show, provenance queries, a web view at /ui/,
GET /healthz and Prometheus metrics at GET /metrics. This process owns the
store; other commands use it with --store http://ADDR (token in
AMDUAT_TOKEN).

Without --auth-file the server has no authentication, so it listens only on
a loopback address or a unix socket; another address needs --auth-file, or
--insecure-no-auth to serve without tokens anyway. Tokens carry the scopes
read, write, run, admin, plan and approve (amduat token --help).

Plans (SPECS.md §18.12, §24): the routes under /v1/plans build, submit,
approve, reject, cancel, retry, verify and list executions of plans, and
--plan-workers N background workers (default 2; 0: none) run submitted
executions and resume the unfinished ones of the store at start and every
--plan-rescan. Which hosts, commands and executors effects may use is
decided by --plan-policy FILE (SPECS.md §23.1), never by the plan; without
it every effect step fails with policy_denied. A worker drives an
execution holding its lease (SPECS.md §24.7), renewed every
--plan-lease/3: servers on one bucket share the work, and a server that
dies is taken over --plan-lease after its last renewal. Submitting needs
the plan scope, approving the approve scope: run alone calls nothing.

The server keeps its store while it serves: amduat pin, rm and gc with
--store http://ADDR (a token with the admin scope) run on it and print what
they print against a directory (SPECS.md §18.10). --max-size SIZE makes the
store a cache: past SIZE stored bytes the least recently used artifacts
that no pin reaches are evicted, down to 90% of SIZE; nothing a pin reaches
is evicted; /metrics counts evictions (SPECS.md §18.11).

One log line per request goes to stderr (--log-format text or json). On
SIGINT or SIGTERM the server stops accepting connections, lets requests in
flight finish (up to --shutdown-timeout), and closes the store: nothing
acknowledged is lost. With --json, one object is printed on stdout once the
server listens: {"store","url","listen","auth","tls"}.

Limits (0 takes the default shown): a request beyond a size limit gets 413,
a run beyond its wall time 504, and a body or response that makes no
progress within --idle-timeout is cut off. A run or replay beyond
--max-concurrent-runs waits for a slot, first come first served, in a
queue of at most --run-queue runs (-1: no queue) for at most
--run-queue-wait; one that finds the queue full gets 429, one whose wait
expires 503, both with Retry-After, which amduat clients honour until
their deadline (SPECS.md §18.6). /metrics shows the queue's length and
waits.

Memory (SPECS.md §18.8): batch-put bodies held at once total at most
--write-buffer (more batch puts wait their turn; none is refused); the
store keeps at most two memtables of --memtable-size and a block cache of
--block-cache.

With --store s3://… (SPECS.md §6.7), --cache-dir DIR keeps a copy of each
artifact the server fetches from the bucket in DIR, at most --cache-size
bytes (default 1G; least recently used out first; artifacts above a
quarter of it are not kept). A copy is written only from bytes that hashed
to their reference and is served only after hashing to it again: a file
altered on disk is removed and the bucket read instead. One server per
DIR.`,
		Example: `  amduat serve --store /srv/amduat                  # http://127.0.0.1:8080
  amduat --store http://127.0.0.1:8080 put notes.txt  # from another shell
  amduat token add ci --scope read,write,run --auth-file /srv/tokens.json
  amduat serve --listen :8443 --auth-file /srv/tokens.json --tls-cert c.pem --tls-key k.pem`,
		Args: rangeArgs(0, 0),
		RunE: func(c *cobra.Command, _ []string) (err error) {
			if isRemote(a.storeDir) {
				return usagef("--store %s is a server; serve needs a store directory", a.storeDir)
			}
			if unixPath != "" && c.Flags().Changed("listen") {
				return usagef("--listen and --unix are exclusive")
			}
			if (tlsCert == "") != (tlsKey == "") {
				return usagef("--tls-cert and --tls-key go together")
			}
			if limits.RunWorkers < 0 {
				return usagef("--run-jobs %d: want 0 (the usable CPUs) or more", limits.RunWorkers)
			}
			if (cacheDir != "" || cacheSize != "") && !isS3(a.storeDir) {
				return usagef("--cache-dir and --cache-size apply to a bucket (--store s3://…) only")
			}
			if cacheSize != "" {
				if cacheDir == "" {
					return usagef("--cache-size needs --cache-dir")
				}
				n, err := parseSize(cacheSize)
				if err != nil || n == 0 || n > 1<<62 {
					return usagef("--cache-size %q: want a positive byte count (e.g. 10G)", cacheSize)
				}
				a.s3Cache.CacheSize = int64(n)
			}
			a.s3Cache.CacheDir = cacheDir
			// A server answers repeated reads of small artifacts from
			// memory (SPECS.md §6.7, "Requests per operation").
			a.s3Cache.MemCacheSize = s3store.DefaultMemCacheSize
			var logger *slog.Logger
			switch logFormat {
			case "text":
				logger = slog.New(slog.NewTextHandler(a.stderr, nil))
			case "json":
				logger = slog.New(slog.NewJSONHandler(a.stderr, nil))
			default:
				return usagef("--log-format %q: want text or json", logFormat)
			}
			var auth *server.Auth
			if authFile != "" {
				if auth, err = server.LoadAuth(authFile); err != nil {
					return fail(exitIO, authFile, err)
				}
			}
			network, addr := "tcp", listen
			if unixPath != "" {
				network, addr = "unix", unixPath
			}
			if auth == nil && !insecure && network == "tcp" && !loopbackAddr(addr) {
				return usagef("--listen %s is not a loopback address: give --auth-file FILE (see amduat token), or --insecure-no-auth to serve without tokens", addr)
			}
			if memTable > 1<<30 || blockCache > 1<<40 || writeBuffer == 0 || writeBuffer > 1<<40 {
				return usagef("--memtable-size %s, --block-cache %s, --write-buffer %s: want at most 1G, 1T and 1T, and a positive --write-buffer", formatSize(memTable), formatSize(blockCache), formatSize(writeBuffer))
			}
			limits.WriteBuffer = int64(writeBuffer)
			s, err := a.open(&pebblestore.Options{MemTableSize: max(memTable, 1<<20), CacheSize: int64(blockCache)})
			if err != nil {
				return err
			}
			store, ok := s.(server.Backend)
			if !ok {
				s.Close()
				return usagef("--store %s cannot be served", a.storeDir)
			}
			defer closeStore(s, a.storeDir, &err)
			if limits.RunMemoryBudget == 0 {
				runs := limits.MaxConcurrentRuns
				if runs <= 0 {
					runs = server.DefaultLimits.MaxConcurrentRuns
				}
				limits.RunMemoryBudget = memoryBudget(0) / uint64(runs)
			}
			// The WebAssembly calls of all runs share the machine's budget
			// (SPECS.md §20.8).
			ops, done, err := a.opRegistryBudget(c.Context(), false, memoryBudget(0))
			if err != nil {
				return err
			}
			defer done()
			if planWorkers < 0 {
				return usagef("--plan-workers %d: want 0 (none) or more", planWorkers)
			}
			var plans *server.PlanConfig
			if _, ok := s.(asl.Pinner); ok {
				runner, planDone, err := a.planRunnerWith(s, planPolicy, ops)
				if err != nil {
					return err
				}
				defer planDone()
				plans = &server.PlanConfig{Runner: runner, Workers: planWorkers, LeaseTTL: planLease, Rescan: planRescan}
			} else if planPolicy != "" {
				return usagef("--plan-policy: --store %s keeps no pins, so it runs no plans", a.storeDir)
			}
			srv, err := server.New(server.Config{Store: store, Auth: auth, Logger: logger, Limits: limits, Version: moduleVersion(), Ops: ops, Plans: plans})
			if err != nil {
				return fail(exitIO, a.storeDir, err)
			}
			// Stops the plan workers after the HTTP server, before the
			// executors and the store close.
			defer srv.Close()
			if network == "unix" {
				// A socket left by a server that died would refuse the bind.
				if fi, serr := os.Lstat(addr); serr == nil && fi.Mode()&os.ModeSocket != 0 {
					os.Remove(addr)
				}
			}
			ln, err := net.Listen(network, addr)
			if err != nil {
				return fail(exitIO, addr, err)
			}
			if maxConns > 0 {
				ln = netutil.LimitListener(ln, maxConns)
			}
			hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: headerTimeout, IdleTimeout: 2 * time.Minute,
				ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
			scheme := "http"
			if tlsCert != "" {
				cert, err := tls.LoadX509KeyPair(tlsCert, tlsKey)
				if err != nil {
					ln.Close()
					return fail(exitIO, tlsCert, err)
				}
				hs.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
				ln = tls.NewListener(ln, hs.TLSConfig)
				scheme = "https"
			}
			url := scheme + "://" + ln.Addr().String()
			if network == "unix" {
				abs, err := filepath.Abs(addr)
				if err != nil {
					ln.Close()
					return fail(exitIO, addr, err)
				}
				url = unixStoreURL(abs)
			}
			info := serveJSON{Store: a.storeDir, URL: url, Listen: ln.Addr().String(), Auth: auth != nil, TLS: tlsCert != ""}
			if a.jsonOut {
				if err := a.printJSON(info); err != nil {
					ln.Close()
					return fail(exitIO, "stdout", err)
				}
			}
			// After a signal the process must outlive the requests'
			// deadline and the store's close (SPECS.md §16.2, §18.8);
			// set before any signal can be taken.
			interruptGrace.Store(int64(shutdownTimeout + serveCloseGrace))
			logger.Info("serving", "store", a.storeDir, "url", url, "auth", auth != nil, "tls", tlsCert != "")
			errc := make(chan error, 1)
			go func() { errc <- hs.Serve(server.JSONErrors(ln)) }()
			select {
			case err := <-errc:
				return fail(exitIO, addr, err)
			case <-c.Context().Done():
			}
			logger.Info("shutting down", "in_flight", srv.InFlight())
			ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
			defer cancel()
			if err := hs.Shutdown(ctx); err != nil {
				logger.Warn("shutdown: requests still in flight were cut off", "error", err.Error())
				hs.Close()
			}
			if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fail(exitIO, addr, err)
			}
			if network == "unix" {
				os.Remove(addr)
			}
			logger.Info("stopped")
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:8080", "TCP address to listen on (port 0 picks one; --json prints it)")
	f.StringVar(&unixPath, "unix", "", "listen on this unix socket instead")
	f.StringVar(&authFile, "auth-file", "", "token file (amduat token add); requests need a bearer token with the route's scope")
	f.BoolVar(&insecure, "insecure-no-auth", false, "allow a non-loopback --listen without --auth-file")
	f.StringVar(&tlsCert, "tls-cert", "", "serve HTTPS with this PEM certificate (with --tls-key)")
	f.StringVar(&tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	f.StringVar(&logFormat, "log-format", "text", "request log format on stderr: text or json")
	f.StringVar(&cacheDir, "cache-dir", "", "with --store s3://…: keep verified copies of fetched artifacts in DIR (SPECS.md §6.7)")
	f.StringVar(&planPolicy, "plan-policy", "", "policy file deciding the hosts, commands and executors plans' effects may use (SPECS.md §23.1; none: every effect denied)")
	f.IntVar(&planWorkers, "plan-workers", 2, "executions of plans run at once in the background (0: none)")
	f.DurationVar(&planLease, "plan-lease", plan.DefaultLeaseTTL, "lease time of an execution a worker drives: renewed every third of it, taken over by another server after it (SPECS.md §24.7)")
	f.DurationVar(&planRescan, "plan-rescan", time.Minute, "how often the workers look for unfinished executions of the store (other servers' too)")
	f.StringVar(&cacheSize, "cache-size", "", "bound of --cache-dir in bytes, K/M/G/T suffixes (default 1G)")
	d := server.DefaultLimits
	f.Int64Var(&limits.MaxArtifactBytes, "max-artifact-bytes", d.MaxArtifactBytes, "largest artifact one put may send (413 beyond)")
	f.Int64Var(&limits.MaxBatchBytes, "max-batch-bytes", d.MaxBatchBytes, "largest total ArtifactBytes of one batch put (413 beyond)")
	f.IntVar(&limits.MaxBatchCount, "max-batch-count", d.MaxBatchCount, "most artifacts in one batch put (413 beyond)")
	f.Int64Var(&limits.MaxJSONBytes, "max-json-bytes", d.MaxJSONBytes, "largest JSON request body (413 beyond)")
	f.IntVar(&limits.MaxConcurrentRuns, "max-concurrent-runs", d.MaxConcurrentRuns, "runs and replays at once (more wait in the run queue)")
	f.IntVar(&limits.RunQueueLength, "run-queue", d.RunQueueLength, "runs and replays that may wait for a run slot (-1: none); one more gets 429 with Retry-After")
	f.DurationVar(&limits.RunQueueWait, "run-queue-wait", d.RunQueueWait, "longest a run waits for a slot; past it 503 with Retry-After")
	limits.RunWorkBudget = defaultWorkBudget
	f.Var(sizeValue{&limits.RunWorkBudget}, "max-run-work", "bytes all node outputs of one run may total (K, M, G, T suffixes; 0: none); above it the run fails with 500 and stores nothing (SPECS §12.8)")
	f.IntVar(&limits.RunWorkers, "run-jobs", 0, "goroutines running independent nodes' operations within one run (0: GOMAXPROCS; 1: sequential); changes no byte (SPECS §12.10)")
	f.Var(sizeValue{&limits.MaxStoreBytes}, "max-size", "bound the stored bytes of the store's artifacts (K, M, G, T suffixes; 0: none): past it the least recently used artifacts no pin reaches are evicted (SPECS §18.11)")
	writeBuffer = uint64(d.WriteBuffer)
	f.Var(sizeValue{&writeBuffer}, "write-buffer", "bytes of batch-put bodies held in memory at once; more batch puts wait for room (a larger batch passes alone)")
	so := server.StoreOptions()
	memTable, blockCache = so.MemTableSize, uint64(so.CacheSize)
	f.Var(sizeValue{&memTable}, "memtable-size", "size of each of the store's (at most two) Pebble memtables, the writes not yet flushed to its tables (at least 1M)")
	f.Var(sizeValue{&blockCache}, "block-cache", "bytes of the store's Pebble block cache (index records read from its tables)")
	f.DurationVar(&limits.RunTimeout, "run-timeout", d.RunTimeout, "wall-time bound of one run or replay (504 beyond)")
	f.DurationVar(&limits.IdleTimeout, "idle-timeout", d.IdleTimeout, "longest a request body or response may make no progress")
	f.DurationVar(&headerTimeout, "read-header-timeout", 10*time.Second, "longest a client may take to send request headers")
	f.IntVar(&maxConns, "max-connections", 1024, "most simultaneous connections (0: no bound); more wait to be accepted")
	f.DurationVar(&shutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGINT/SIGTERM, how long requests in flight may finish")
	return c
}

// loopbackAddr reports whether a --listen address binds only loopback.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
