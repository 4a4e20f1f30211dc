// Package server is HTTP API v1 (SPECS.md §18): the store, the surface and
// the provenance queries of one process, served to many clients. It is a
// thin adapter: every handler calls the Go API the command line calls
// (asl.Store, surf.Surface, tgk, report) and holds no store or surface
// logic of its own.
//
// Invariants:
//   - A put is acknowledged (200) only after the backend's Put or PutBatch
//     returned, so an acknowledged artifact is durable (SPECS.md §6.1).
//   - Bytes are served only through the backend's verifying reader; damage
//     found after the headers were sent aborts the connection, so a client
//     never sees a complete response with wrong bytes.
//   - Memory per request is bounded by the configured limits, whatever the
//     size of an artifact: single puts and gets stream.
//   - Every error is a JSON body {"error","code"} with a status from §18.2;
//     a panic in a handler is a 500, never a crashed process.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/internal/metrics"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/server/webui"
	"github.com/amduat/amduat/surf"
)

// Backend is what the server needs from a store: the asl.Store interfaces,
// the index capability behind the action cache, node memo and provenance,
// and the hash for new puts.
type Backend interface {
	asl.Store
	asl.Indexer
	DefaultHash() asl.HashID
}

// Limits bound what one request may cost (SPECS.md §18.3). Zero fields take
// the defaults of DefaultLimits.
type Limits struct {
	MaxArtifactBytes  int64 // one POST /v1/artifacts body
	MaxBatchBytes     int64 // the ArtifactBytes of one batch
	MaxBatchCount     int   // artifacts in one batch
	MaxJSONBytes      int64 // one JSON request body
	MaxConcurrentRuns int   // runs and replays at once; more wait in the run queue
	// RunQueueLength bounds the runs and replays waiting for a slot
	// (SPECS.md §18.6): one more is refused with 429. Negative means no
	// queue (every run beyond the slots is refused at once).
	RunQueueLength int
	// RunQueueWait bounds how long a run waits for a slot; past it the run
	// is refused with 503.
	RunQueueWait time.Duration
	RunTimeout   time.Duration // wall time of one run or replay
	MaxListLimit int           // entries of one list or index page
	// IdleTimeout bounds how long a request body read or a response write
	// may make no progress; a slow client is cut off after it.
	IdleTimeout time.Duration
	// RunMemoryBudget bounds the node output bytes one run holds at once
	// (pel.RunOptions.MemoryBudget; 0: none). Exceeding it is an internal
	// failure: 500 "internal", nothing stored (SPECS.md §12.8).
	RunMemoryBudget uint64
	// RunWorkBudget bounds the total node output bytes of one run
	// (pel.RunOptions.WorkBudget; 0: none). Exceeding it is an internal
	// failure: 500, nothing stored.
	RunWorkBudget uint64
	// RunWorkers is pel.RunOptions.Workers of each run (SPECS.md §12.10):
	// the goroutines that may run independent nodes' operations at once;
	// it changes no stored byte. 0 means GOMAXPROCS; 1 is sequential.
	RunWorkers int
	// MaxStoreBytes bounds the stored bytes of the store's artifacts (0:
	// none): past it the least recently used artifacts no pin reaches are
	// evicted (SPECS.md §18.11, evict.go). The store must implement
	// asl.Deleter.
	MaxStoreBytes uint64
	// WriteBuffer bounds the bytes of batch-put bodies held in memory at
	// once (writegate.go): further batch puts wait for room, none is
	// refused. A batch larger than it passes alone. It bounds the server's
	// memory under many writing clients.
	WriteBuffer int64
}

// StoreOptions are the settings of the embedded store `amduat serve`
// opens, its --memtable-size and --block-cache defaults (SPECS.md §18.8,
// "Memory"). The block cache holds the index records of some 400,000
// artifacts (32 MiB; the memtables, which Pebble charges to the same cache,
// come on top), so that a GET of a small artifact reads no table block from
// disk; a write reads few blocks, so it leaves the cache mostly empty. With
// these and the default WriteBuffer, the server's peak RSS while 16 clients
// write 1 KiB artifacts stays below 64 MiB (BENCHMARKS.md, write-rss): 4 MiB
// memtables, which the static build's Go heap counts twice through GOGC,
// took it to 61–68 MiB.
func StoreOptions() pebblestore.Options {
	return pebblestore.Options{MemTableSize: 2 << 20, CacheSize: 32 << 20}
}

// DefaultLimits are the limits of a zero Limits field.
var DefaultLimits = Limits{
	MaxArtifactBytes:  64 << 30,
	MaxBatchBytes:     64 << 20,
	MaxBatchCount:     16384,
	MaxJSONBytes:      16 << 20,
	MaxConcurrentRuns: max(2, runtime.GOMAXPROCS(0)),
	// A queued run holds a goroutine, a connection and its decoded request
	// (references, well under 1 KiB): 64 of them cost little, and are the
	// bench's 64 load clients all asking for a run at once.
	RunQueueLength: 64,
	// As long as the client's own longest wait between retries
	// (httpstore.DefaultRetryMaxWait): holding the request that long costs
	// the client nothing it would not have spent waiting to retry.
	RunQueueWait: 30 * time.Second,
	RunTimeout:   10 * time.Minute,
	MaxListLimit: 10000,
	IdleTimeout:  60 * time.Second,
	// Two batches of 1,000 1 KiB artifacts: one is read and hashed while
	// the other syncs. Sixteen writing clients then hold the server at
	// about 61 MiB (bench server/write-rss) against 101 MiB unbounded.
	WriteBuffer: 2 << 20,
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.MaxArtifactBytes > 0 {
		d.MaxArtifactBytes = l.MaxArtifactBytes
	}
	if l.MaxBatchBytes > 0 {
		d.MaxBatchBytes = l.MaxBatchBytes
	}
	if l.MaxBatchCount > 0 {
		d.MaxBatchCount = l.MaxBatchCount
	}
	if l.MaxJSONBytes > 0 {
		d.MaxJSONBytes = l.MaxJSONBytes
	}
	if l.MaxConcurrentRuns > 0 {
		d.MaxConcurrentRuns = l.MaxConcurrentRuns
	}
	if l.RunTimeout > 0 {
		d.RunTimeout = l.RunTimeout
	}
	if l.RunQueueLength != 0 {
		d.RunQueueLength = max(l.RunQueueLength, 0)
	}
	if l.RunQueueWait > 0 {
		d.RunQueueWait = l.RunQueueWait
	}
	if l.MaxListLimit > 0 {
		d.MaxListLimit = l.MaxListLimit
	}
	if l.IdleTimeout > 0 {
		d.IdleTimeout = l.IdleTimeout
	}
	if l.WriteBuffer > 0 {
		d.WriteBuffer = l.WriteBuffer
	}
	d.RunMemoryBudget = l.RunMemoryBudget
	d.RunWorkBudget = l.RunWorkBudget
	d.RunWorkers = l.RunWorkers
	d.MaxStoreBytes = min(l.MaxStoreBytes, math.MaxInt64)
	if d.RunWorkers <= 0 {
		d.RunWorkers = runtime.GOMAXPROCS(0)
	}
	return d
}

// Config configures New.
type Config struct {
	Store Backend
	// Auth checks bearer tokens; nil serves every request with every scope
	// (only safe on loopback or a unix socket: cmd/amduat enforces that).
	Auth *Auth
	// Logger receives one line per request; nil discards them.
	Logger *slog.Logger
	// Registry receives the server's metrics; nil uses a new registry,
	// served at /metrics either way.
	Registry *metrics.Registry
	Limits   Limits
	// Version is reported by /v1/meta.
	Version string
	// Ops holds the operations programs run with and JSON programs are
	// parsed with (readable params); nil means opreg.Kernel(). cmd/amduat
	// passes the kernel plus amduat.wasm.run (SPECS.md §20).
	Ops *opreg.Registry
	// Plans, when set, serves the plan routes and runs executions in the
	// background (SPECS.md §18.12); nil answers them 501.
	Plans *PlanConfig
}

// Server serves HTTP API v1. It is safe for concurrent use.
type Server struct {
	store Backend
	auth  *Auth
	// sessions signs the web view's browser sessions; nil without auth.
	sessions *sessions
	log      *slog.Logger
	limits   Limits
	version  string
	ops      *opreg.Registry // nil: the kernel
	metrics  *serverMetrics
	runs     *runQueue // run slots and the runs waiting for one
	writes   *writeGate
	mux      *http.ServeMux
	handler  http.Handler
	// getRef and headRef are the wrapped handlers of GET and HEAD
	// /v1/artifacts/{ref}, which serve reaches without the mux
	// (artifactRoute).
	getRef, headRef http.Handler

	inFlight atomic.Int64

	// maint is held for writing by pin changes, deletions, collections
	// and evictions (admin.go), and for reading by runs: a collection never
	// overlaps a run, whose inputs it could otherwise judge unreachable
	// after the run read them and before the run stored the result that
	// reaches them.
	maint sync.RWMutex
	// salts is the action-cache salt the store was last read with, shared
	// by the surface of every run (surf.SaltMemo).
	salts surf.SaltMemo
	evict *evictor  // nil without Limits.MaxStoreBytes
	plans *planPool // nil without Config.Plans

	// forms signs the CSRF tokens of the web view's plan forms (sessions
	// when signing in is on, its own key otherwise).
	forms *sessions
}

// New returns a server over cfg.Store.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("server: no store")
	}
	lim := cfg.Limits.withDefaults()
	reg := cfg.Registry
	if reg == nil {
		reg = metrics.NewRegistry()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{store: cfg.Store, auth: cfg.Auth, log: log, limits: lim, version: cfg.Version, ops: cfg.Ops,
		runs: newRunQueue(lim.MaxConcurrentRuns, lim.RunQueueLength, lim.RunQueueWait), writes: newWriteGate(lim.WriteBuffer), mux: http.NewServeMux()}
	m, err := newMetrics(reg, s.runs)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	if s.evict, err = newEvictor(s, int64(lim.MaxStoreBytes), reg); err != nil {
		return nil, err
	}
	if cfg.Plans != nil && cfg.Plans.Runner != nil {
		s.plans = newPlanPool(*cfg.Plans, log, m)
	}
	uiOpts := webui.Options{Prefix: "/ui/", Ops: cfg.Ops, RawURL: func(r asl.Reference) string { return httpstore.PathArtifact + r.String() }}
	if s.auth != nil {
		s.sessions = newSessions(s.auth)
		uiOpts.Session = s.sessions.webSession
	}
	if s.plans != nil {
		s.forms = s.sessions
		if s.forms == nil {
			s.forms = newSessions(nil)
		}
		uiOpts.Plans, uiOpts.PlanForm = s.plans.runner, s.planForm
	}
	s.routes(reg, webui.New(cfg.Store, uiOpts))
	s.handler = http.HandlerFunc(s.serve)
	if s.plans != nil {
		s.plans.start()
	}
	return s, nil
}

// Close stops the background plan workers (their runs in progress are
// cut off as by a crash and resumed by the next runner); the handler
// keeps serving. Call it once, after the HTTP server stopped.
func (s *Server) Close() {
	if s.plans != nil {
		s.plans.Close()
	}
}

// Handler returns the server's root handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Limits returns the limits in force.
func (s *Server) Limits() Limits { return s.limits }

// InFlight is the number of requests being served.
func (s *Server) InFlight() int64 { return s.inFlight.Load() }

// scope is what a route needs of the caller's token.
type scope uint8

const (
	scopeNone    scope = iota // open: health, metadata
	scopeRead                 // reads
	scopeWrite                // puts
	scopeRun                  // runs and replays
	scopeAdmin                // pins, rm, gc (admin.go)
	scopePlan                 // submit, cancel and retry plans: calls the world (plans.go)
	scopeApprove              // approve and reject a plan's gates (plans.go)
)

func (sc scope) String() string {
	switch sc {
	case scopeRead:
		return "read"
	case scopeWrite:
		return "write"
	case scopeRun:
		return "run"
	case scopeAdmin:
		return "admin"
	case scopePlan:
		return "plan"
	case scopeApprove:
		return "approve"
	}
	return "none"
}

// route is one registered handler with what it needs.
type route struct {
	pattern string
	scope   scope
	h       func(w http.ResponseWriter, r *http.Request) error
}

func (s *Server) routes(reg *metrics.Registry, ui http.Handler) {
	rs := []route{
		{"GET /healthz", scopeNone, s.healthz},
		{"GET /v1/meta", scopeNone, s.meta},
		{"POST " + httpstore.PathArtifacts, scopeWrite, s.putArtifact},
		{"GET " + httpstore.PathArtifacts, scopeRead, s.listArtifacts},
		{"POST " + httpstore.PathBatch, scopeWrite, s.putBatch},
		{"POST " + httpstore.PathMissing, scopeRead, s.missing},
		{"POST " + httpstore.PathBatchRead, scopeRead, s.batchRead},
		{patternGetRef, scopeRead, s.getArtifact},
		{patternHeadRef, scopeRead, s.getArtifact},
		{"GET " + httpstore.PathIndex + "{space}", scopeRead, s.scanIndex},
		{"GET " + httpstore.PathIndex + "{space}/{key}", scopeRead, s.lookupIndex},
		{"POST /v1/pel/programs", scopeWrite, s.buildProgram},
		{"POST /v1/pel/run", scopeRun, s.run},
		{"POST /v1/pel/verify", scopeRun, s.verify},
		{"GET /v1/pel/show/{ref}", scopeRead, s.show},
		{"GET /v1/prov/why/{ref}", scopeRead, s.provWhy},
		{"GET /v1/prov/uses/{ref}", scopeRead, s.provUses},
		{"GET " + httpstore.PathPins, scopeAdmin, s.listPins},
		{"POST " + httpstore.PathPins, scopeAdmin, s.addPin},
		{"GET " + httpstore.PathPinLog, scopeAdmin, s.pinLog},
		{"POST " + httpstore.PathPinsRemove, scopeAdmin, s.removePins},
		{"POST " + httpstore.PathDelete, scopeAdmin, s.deleteArtifacts},
		{"POST " + httpstore.PathGC, scopeAdmin, s.gc},
	}
	rs = append(rs, s.planRoutes()...)
	for _, rt := range rs {
		h := s.wrap(rt)
		s.mux.Handle(rt.pattern, h)
		switch rt.pattern {
		case patternGetRef:
			s.getRef = h
		case patternHeadRef:
			s.headRef = h
		}
	}
	metricsH := metricsHandler(reg)
	s.mux.Handle("GET /metrics", s.wrap(route{"GET /metrics", scopeRead, func(w http.ResponseWriter, r *http.Request) error {
		metricsH.ServeHTTP(w, r)
		return nil
	}}))
	// The web view (SPECS.md §18.8) renders its own pages, errors included.
	s.mux.Handle("GET /ui/", s.wrap(route{"GET /ui/", scopeRead, func(w http.ResponseWriter, r *http.Request) error {
		ui.ServeHTTP(w, r)
		return nil
	}}))
	if s.sessions != nil {
		// Signing in from a browser (SPECS.md §18.8).
		for _, rt := range []route{
			{"GET /ui/login", scopeNone, s.loginPage},
			{"POST /ui/login", scopeNone, s.login},
			{"POST /ui/logout", scopeNone, s.logout},
		} {
			s.mux.Handle(rt.pattern, s.wrap(rt))
		}
	}
	if s.plans != nil {
		// The web view's approve and reject forms (plans_ui.go): the
		// route checks its caller itself (a session or a token, the CSRF
		// token, the approve scope).
		s.mux.Handle("POST /ui/plans/{exec}/decide", s.wrap(route{"POST /ui/plans/{exec}/decide", scopeNone, s.planDecision}))
	}
	s.mux.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusFound))
}

// The patterns of the artifact read routes, which artifactRoute matches
// without the mux.
const (
	patternGetRef  = "GET " + httpstore.PathArtifact + "{ref}"
	patternHeadRef = "HEAD " + httpstore.PathArtifact + "{ref}"
)

// artifactRoute matches GET and HEAD /v1/artifacts/REF, the route most
// requests take, without the mux, which would otherwise match each request
// twice (serve asks it whether a route matches before it serves). It
// matches only a path the mux would route to the same pattern with the same
// {ref}: the last segment non-empty lowercase hex (the alphabet of
// reference text, §18.4), so that the path needs no cleaning or unescaping,
// and no other pattern registered for these methods can match it. Any other
// request goes through the mux as before, malformed references included.
func (s *Server) artifactRoute(r *http.Request) (http.Handler, string, string) {
	var h http.Handler
	var pattern string
	switch r.Method {
	case http.MethodGet:
		h, pattern = s.getRef, patternGetRef
	case http.MethodHead:
		h, pattern = s.headRef, patternHeadRef
	default:
		return nil, "", ""
	}
	ref, ok := strings.CutPrefix(r.URL.Path, httpstore.PathArtifact)
	if !ok || ref == "" || r.URL.RawPath != "" || h == nil {
		return nil, "", ""
	}
	for i := 0; i < len(ref); i++ {
		if c := ref[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return nil, "", ""
		}
	}
	return h, pattern, ref
}

// serve dispatches a request: a route's handler, or a JSON 404/405.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if h, pattern, ref := s.artifactRoute(r); h != nil {
		r.Pattern = pattern
		r.SetPathValue("ref", ref)
		h.ServeHTTP(w, r)
		return
	}
	if _, pattern := s.mux.Handler(r); pattern != "" {
		s.mux.ServeHTTP(w, r)
		return
	}
	rec := s.begin(w, r, "unmatched")
	defer rec.end(r)
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, p := s.mux.Handler(probe); p != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		rec.err = &httpError{http.StatusMethodNotAllowed, httpstore.CodeMethod, fmt.Sprintf("%s %s: method not allowed (allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", "))}
	} else {
		rec.err = &httpError{http.StatusNotFound, httpstore.CodeNoRoute, fmt.Sprintf("%s %s: no such route in API v1", r.Method, r.URL.Path)}
	}
	writeError(rec, r, rec.err)
}

// wrap applies authentication, metrics, logging and panic recovery to a
// route.
func (s *Server) wrap(rt route) http.Handler {
	label := rt.pattern
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := s.begin(w, r, label)
		defer rec.end(r)
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					rec.aborted = true
					panic(p)
				}
				buf := make([]byte, 4096)
				buf = buf[:runtime.Stack(buf, false)]
				s.log.Error("handler panic", "route", label, "panic", fmt.Sprint(p), "stack", string(buf))
				rec.err = &httpError{http.StatusInternalServerError, httpstore.CodeIO, "internal error (logged by the server)"}
				if !rec.wroteHeader {
					writeError(rec, r, rec.err)
				}
			}
		}()
		tok, err := s.authorize(r, rt.scope)
		rec.token = tok
		if err != nil {
			rec.err = err
			if s.sessions != nil && rt.pattern == "GET /ui/" && r.Header.Get("Authorization") == "" {
				// A browser without a session is sent to sign in.
				http.Redirect(rec, r, "/ui/login", http.StatusSeeOther)
				return
			}
			writeError(rec, r, err)
			return
		}
		if rt.scope == scopeAdmin {
			r = r.WithContext(actorContext(r.Context(), tok, s.auth != nil))
		}
		if err := rt.h(rec, r); err != nil {
			rec.err = err
			if rec.wroteHeader {
				// Headers and part of the body are out: abort the
				// connection so the client sees a broken response, not a
				// complete wrong one.
				rec.aborted = true
				panic(http.ErrAbortHandler)
			}
			writeError(rec, r, err)
		}
	})
}

// authorize checks the bearer token against the route's scope.
func (s *Server) authorize(r *http.Request, need scope) (string, error) {
	if s.auth == nil {
		return "", nil
	}
	name, scopes, err := s.auth.Check(r.Header.Get("Authorization"))
	if errors.Is(err, errNoToken) && s.sessions != nil && need == scopeRead && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		// A browser session stands in for the token on reads only.
		if e, _, ok := s.sessions.fromRequest(r); ok {
			name, scopes, err = e.name, e.scopes, nil
		}
	}
	if err != nil {
		if need == scopeNone && errors.Is(err, errNoToken) {
			return "", nil
		}
		return "", &httpError{http.StatusUnauthorized, httpstore.CodeUnauthorized, err.Error()}
	}
	if need != scopeNone && !scopes.has(need) {
		return name, &httpError{http.StatusForbidden, httpstore.CodeForbidden,
			fmt.Sprintf("token %q lacks the %s scope this route needs", name, need)}
	}
	return name, nil
}

// recorder observes a response for logging and metrics.
type recorder struct {
	http.ResponseWriter
	s           *Server
	route       string
	start       time.Time
	status      int
	wroteHeader bool
	bytesOut    int64
	bytesIn     *countingBody
	token       string
	err         error
	aborted     bool
}

func (s *Server) begin(w http.ResponseWriter, r *http.Request, route string) *recorder {
	s.inFlight.Add(1)
	rec := &recorder{ResponseWriter: w, s: s, route: route, start: time.Now(), status: http.StatusOK}
	rec.bytesIn = &countingBody{r: r.Body}
	r.Body = rec.bytesIn
	return rec
}

func (rec *recorder) WriteHeader(code int) {
	if !rec.wroteHeader {
		rec.status, rec.wroteHeader = code, true
	}
	rec.ResponseWriter.WriteHeader(code)
}

func (rec *recorder) Write(p []byte) (int, error) {
	rec.wroteHeader = true
	n, err := rec.ResponseWriter.Write(p)
	rec.bytesOut += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection's deadlines.
func (rec *recorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

func (rec *recorder) end(r *http.Request) {
	s := rec.s
	// Give net/http back the body it made: after the handler it looks at
	// the body's own type to decide what to do with an unread rest (close
	// the connection when it is too large to discard, never send a 100
	// Continue nobody asked for), and a wrapper made it read up to 256 KiB
	// instead, with no deadline: a client that sent a Content-Length and
	// no body held the connection, and never saw the refusal. What it
	// still reads to discard is bounded like every body read.
	r.Body = rec.bytesIn.r
	if r.ContentLength != 0 {
		http.NewResponseController(rec.ResponseWriter).SetReadDeadline(time.Now().Add(s.limits.IdleTimeout))
	}
	s.inFlight.Add(-1)
	d := time.Since(rec.start)
	status := rec.status
	if rec.aborted {
		status = 0 // the connection was cut
	}
	s.metrics.observe(rec.route, r.Method, status, d, rec.bytesIn.n, rec.bytesOut)
	level := slog.LevelInfo
	if rec.err != nil && (status >= 500 || status == 0) {
		level = slog.LevelError
	}
	if !s.log.Enabled(context.Background(), level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("route", rec.route),
		slog.Int("status", status), slog.Int64("bytes_in", rec.bytesIn.n), slog.Int64("bytes_out", rec.bytesOut),
		slog.Float64("ms", float64(d.Microseconds())/1000), slog.String("remote", r.RemoteAddr),
	}
	if rec.token != "" {
		attrs = append(attrs, slog.String("token", rec.token))
	}
	if rec.err != nil {
		attrs = append(attrs, slog.String("error", oneLine(rec.err.Error())))
	}
	s.log.LogAttrs(context.Background(), level, "request", attrs...)
}

// countingBody counts the request bytes a handler read.
type countingBody struct {
	r interface {
		Read([]byte) (int, error)
		Close() error
	}
	n int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingBody) Close() error { return c.r.Close() }

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
