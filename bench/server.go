package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/internal/metrics"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/report"
	"github.com/amduat/amduat/server"
	"github.com/amduat/amduat/surf"
)

// The server group measures `amduat serve` (HTTP API v1) on loopback
// against the embedded store, each figure beside the same work done on an
// embedded pebblestore in the same run:
//
//   - small artifacts: PutBatch and Fetch through an in-process server
//     (server.New over a pebblestore, net/http on 127.0.0.1:0, one
//     httpstore.Client per client goroutine) with 1, 16 and 64 clients;
//   - surface runs: POST /v1/pel/run against surf.Surface.Run;
//   - a load test: 64 goroutines sharing one httpstore.Client mix put,
//     batch put, get, has and run for a bounded time, checking every
//     answer;
//   - a large artifact: Put of a generated stream and Fetch to EOF through
//     the in-process server against the embedded store (MiB/s), then
//     `amduat put FILE` and `amduat get REF` through an `amduat serve`
//     child process against the same commands on a store directory, so
//     that the server's and the client's peak RSS are each their own
//     process's.
const (
	serverSeed     = 6
	serverLoadSeed = 7
	// serverBigBatch is the batch of the headline put row (as small/put-batch).
	serverBigBatch = 1000
	// serverBatch is the batch of the put rows with 1, 16 and 64 clients:
	// small enough that 64 clients all have work at --quick sizes.
	serverBatch = 100
	// serverLoadClients is the number of client goroutines of the load test.
	serverLoadClients = 64
)

// serverClients are the client counts of the concurrent rows.
var serverClients = []int{1, 16, 64}

// serverLoadDuration is how long each side of the load test runs: 10 s at
// full sizes, 3 s at --quick sizes, half a second below.
func serverLoadDuration(s Sizes) time.Duration {
	switch {
	case s.SmallCount >= 100_000:
		return 10 * time.Second
	case s.SmallCount >= 10_000:
		return 3 * time.Second
	}
	return 500 * time.Millisecond
}

// serverRig is an in-process server over a fresh pebblestore, listening on
// a loopback port.
type serverRig struct {
	store *pebblestore.Store
	reg   *metrics.Registry
	hs    *http.Server
	url   string
	done  chan error
}

func startServerRig(dir string) (*serverRig, error) {
	// The store as `amduat serve` opens it.
	so := server.StoreOptions()
	st, err := pebblestore.Create(dir, &so)
	if err != nil {
		return nil, err
	}
	reg := metrics.NewRegistry()
	srv, err := server.New(server.Config{Store: st, Registry: reg, Version: "bench"})
	if err != nil {
		st.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		st.Close()
		return nil, err
	}
	// The settings of `amduat serve`.
	hs := &http.Server{Handler: labelServe("server", srv.Handler()), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: log.New(io.Discard, "", 0)}
	r := &serverRig{store: st, reg: reg, hs: hs, url: "http://" + ln.Addr().String(), done: make(chan error, 1)}
	// The server's goroutines carry the pprof label side=server (they
	// start from this one; labelServe sets it again on each request), so a
	// profile splits server from client work: go tool pprof
	// -tagfocus=side=server.
	go pprof.Do(context.Background(), pprof.Labels("side", "server"), func(context.Context) { r.done <- hs.Serve(ln) })
	return r, nil
}

func (r *serverRig) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := r.hs.Shutdown(ctx)
	if serr := <-r.done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if cerr := r.store.Close(); err == nil {
		err = cerr
	}
	return err
}

// statusCounts returns the server's responses so far by status code
// (amduat_http_requests_total; "0" is an aborted connection).
func (r *serverRig) statusCounts() map[string]float64 {
	out := map[string]float64{}
	for _, f := range r.reg.Gather() {
		if f.Name != "amduat_http_requests_total" {
			continue
		}
		for _, s := range f.Samples {
			for _, l := range s.Labels {
				if l.Name == "code" {
					out[l.Value] += s.Value
				}
			}
		}
	}
	return out
}

// countsText renders the difference after-before of statusCounts.
func countsText(before, after map[string]float64) string {
	var codes []string
	var total float64
	for c, v := range after {
		if v-before[c] > 0 {
			codes = append(codes, c)
			total += v - before[c]
		}
	}
	sort.Strings(codes)
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = fmt.Sprintf("%s: %s", c, formatValue(after[c]-before[c]))
	}
	return fmt.Sprintf("%s HTTP responses (%s)", formatValue(total), strings.Join(parts, ", "))
}

// pool is the outcome of one pass of jobs over worker goroutines.
type pool struct {
	d   time.Duration   // first job started to last job done and after() returned
	lat []time.Duration // each job
}

// runPool runs jobs 0..jobs-1 on workers goroutines, each taking the next
// job when it is free, timing each job and the whole pass; after runs at
// the end of the pass, inside the timing (the store's Sync).
func runPool(workers, jobs int, job func(w, j int) error, after func() error) (pool, error) {
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		lats = make([][]time.Duration, workers)
		errs = make([]error, workers)
	)
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				j := int(next.Add(1) - 1)
				if j >= jobs {
					return
				}
				t := time.Now()
				if err := job(w, j); err != nil {
					errs[w] = err
					return
				}
				lats[w] = append(lats[w], time.Since(t))
			}
		}()
	}
	wg.Wait()
	var err error
	if after != nil {
		err = after()
	}
	p := pool{d: time.Since(start)}
	for _, l := range lats {
		p.lat = append(p.lat, l...)
	}
	return p, errors.Join(append(errs, err)...)
}

// plus is the two passes p and q counted as one: their times added, their
// jobs together.
func (p pool) plus(q pool) pool {
	return pool{d: p.d + q.d, lat: append(p.lat, q.lat...)}
}

func (p pool) pct(q float64) float64 { return percentileMS(p.lat, q) }

// latText gives the p50/p99 of a pass's requests.
func (p pool) latText() string {
	return fmt.Sprintf("p50 %s ms, p99 %s ms", formatValue(p.pct(50)), formatValue(p.pct(99)))
}

// serverSide is one side of a comparison: the embedded store, or the
// server through clients.
type serverSide struct {
	name  string
	store asl.Store
	// clients[w] is worker w's store: the same embedded store for every
	// worker, or one httpstore.Client each.
	clients []asl.Store
	sync    func() error
}

func runServer(ctx context.Context, e *Env) ([]Row, error) {
	dir, err := e.tempDir("server")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	rows, err := serverInProcess(ctx, e, dir)
	if err != nil {
		return nil, err
	}
	large, err := serverLargeProcesses(ctx, e, dir)
	if err != nil {
		return nil, err
	}
	rows = append(rows, large...)
	wr, err := serverWriteRSS(ctx, e, dir)
	if err != nil {
		return nil, err
	}
	return append(rows, wr), nil
}

// serverInProcess measures the rows of the in-process server: small
// artifacts, surface runs and the load test.
func serverInProcess(ctx context.Context, e *Env, dir string) ([]Row, error) {
	emb, err := pebblestore.Create(filepath.Join(dir, "embedded"), nil)
	if err != nil {
		return nil, err
	}
	defer emb.Close()
	rig, err := startServerRig(filepath.Join(dir, "served"))
	if err != nil {
		return nil, err
	}
	defer rig.close()
	maxClients := slices.Max(serverClients)
	clients := make([]asl.Store, maxClients)
	embs := make([]asl.Store, maxClients)
	for i := range clients {
		c, err := httpstore.Open(ctx, rig.url, httpstore.Options{})
		if err != nil {
			return nil, err
		}
		defer c.Close()
		clients[i], embs[i] = c, emb
	}
	sides := [2]serverSide{
		{name: "embedded", store: emb, clients: embs, sync: emb.Sync},
		{name: "server", store: rig.store, clients: clients, sync: rig.store.Sync},
	}

	rows, err := serverSmall(ctx, e, sides)
	if err != nil {
		return nil, err
	}
	run, err := serverRuns(ctx, e, emb, rig, clients[0].(*httpstore.Client))
	if err != nil {
		return nil, err
	}
	rows = append(rows, run...)
	load, err := serverLoad(ctx, e, emb, rig)
	if err != nil {
		return nil, err
	}
	rows = append(rows, load...)
	large, largeRef, err := serverLargeInProcess(ctx, e, emb, clients[0].(*httpstore.Client))
	if err != nil {
		return nil, err
	}
	rows = append(rows, large...)
	files, err := serverVsFiles(ctx, e, dir, rig.url, largeRef)
	if err != nil {
		return nil, err
	}
	return append(rows, files...), nil
}

// serverSmall measures PutBatch and Fetch of 1 KiB artifacts with 1, 16
// and 64 clients on both sides, alternating which side goes first.
func serverSmall(ctx context.Context, e *Env, sides [2]serverSide) ([]Row, error) {
	n, size := e.Sizes.SmallCount, e.Sizes.SmallSize
	buf := make([]byte, n*size)
	arts := make([]asl.Artifact, n)
	gen := func(set uint64) {
		for i := range arts {
			p := buf[i*size : (i+1)*size : (i+1)*size]
			FillRandom(p, serverSeed+set, uint64(i))
			arts[i] = asl.Untagged(p)
		}
	}
	type putPass struct {
		name    string
		clients int
		batch   int
	}
	passes := []putPass{{"server/put-batch", 1, serverBigBatch}}
	for _, c := range serverClients {
		passes = append(passes, putPass{fmt.Sprintf("server/put-c%d", c), c, serverBatch})
	}
	var (
		rows    []Row
		getRefs []asl.Reference
	)
	for k, ps := range passes {
		gen(uint64(k))
		jobs := (n + ps.batch - 1) / ps.batch
		var res [2]pool
		var rss *int64
		refs := [2][]asl.Reference{make([]asl.Reference, n), make([]asl.Reference, n)}
		for i := range 2 {
			si := (i + k) % 2 // alternate which side goes first
			side := sides[si]
			e.logf("server: %s: PutBatch of %d x %d B in batches of %d, %d clients", side.name, n, size, ps.batch, ps.clients)
			w := StartWindow()
			var err error
			phase(ctx, "put-"+side.name, func(ctx context.Context) {
				res[si], err = runPool(ps.clients, jobs, func(w, j int) error {
					lo, hi := j*ps.batch, min((j+1)*ps.batch, n)
					got, err := side.clients[w].PutBatch(ctx, asl.HashSHA256, arts[lo:hi])
					if err == nil && len(got) != hi-lo {
						err = fmt.Errorf("PutBatch returned %d references for %d artifacts", len(got), hi-lo)
					}
					copy(refs[si][lo:hi], got)
					return err
				}, side.sync)
			})
			if si == 1 {
				rss, _ = w.Stop()
			} else {
				w.Stop()
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", ps.name, side.name, err)
			}
		}
		if !slices.Equal(refs[0], refs[1]) {
			return nil, fmt.Errorf("%s: the server acknowledged other references than the embedded store returned", ps.name)
		}
		if getRefs == nil {
			getRefs = refs[0]
		}
		row := Row{
			Name:     ps.name,
			Figure:   Quantity{perSec(n, res[1].d), "artifacts/s"},
			Baseline: &Baseline{perSec(n, res[0].d), "artifacts/s", fmt.Sprintf("embedded PutBatch, %d client(s)", ps.clients)},
			PeakRSS:  rss,
			Note: fmt.Sprintf("%d x %d B random artifacts (a fresh set, new to both stores), PutBatch of %d, %d client goroutine(s) (one httpstore.Client each: hash, POST missing, POST batch), the pass ending with Sync on the store; server %s (per batch %s), embedded %s (per batch %s)",
				n, size, ps.batch, ps.clients, res[1].d.Round(time.Millisecond), res[1].latText(), res[0].d.Round(time.Millisecond), res[0].latText()),
		}
		if ps.batch == serverBigBatch {
			row.Target = &Target{">= 0.5x baseline", OnRatio, AtLeast, 0.5}
		}
		rows = append(rows, row)
	}

	buf, arts = nil, nil // the gets' peak RSS should not hold the generated input
	// Gets of the first set, every artifact once per pass in a shuffled
	// order, verified by the reader on each side.
	order := rand.New(rand.NewPCG(serverSeed, 1)).Perm(n)
	for k, c := range serverClients {
		var res [2]pool
		var rss *int64
		bufs := make([][]byte, c)
		for w := range bufs {
			bufs[w] = make([]byte, size)
		}
		for i := range 2 {
			si := (i + k) % 2
			side := sides[si]
			e.logf("server: %s: Fetch of %d x %d B, %d clients", side.name, n, size, c)
			w := StartWindow()
			var err error
			phase(ctx, "get-"+side.name, func(ctx context.Context) {
				res[si], err = runPool(c, n, func(w, j int) error {
					return fetchAll(ctx, side.clients[w], getRefs[order[j]], bufs[w])
				}, nil)
			})
			if si == 1 {
				rss, _ = w.Stop()
			} else {
				w.Stop()
			}
			if err != nil {
				return nil, fmt.Errorf("server/get-c%d: %s: %w", c, side.name, err)
			}
		}
		row := Row{
			Name:     fmt.Sprintf("server/get-c%d", c),
			Figure:   Quantity{perSec(n, res[1].d), "artifacts/s"},
			Baseline: &Baseline{perSec(n, res[0].d), "artifacts/s", fmt.Sprintf("embedded Fetch, %d client(s)", c)},
			PeakRSS:  rss,
			Note: fmt.Sprintf("Fetch + read to EOF of all %d in a shuffled order, %d client goroutine(s), each artifact verified by the reader (the client re-hashes what the server verified); server %s (%s), embedded %s (%s)",
				n, c, res[1].d.Round(time.Millisecond), res[1].latText(), res[0].d.Round(time.Millisecond), res[0].latText()),
		}
		rows = append(rows, row)
	}

	// Batched gets: asl.GetBatch of serverBigBatch references at a time,
	// one POST /v1/artifacts/batch-read each through the server, one Get
	// each on the embedded store (it has no cheaper path).
	var res [2]pool
	var rss *int64
	jobs := (n + serverBigBatch - 1) / serverBigBatch
	for i := range 2 {
		side := sides[i]
		e.logf("server: %s: GetBatch of %d x %d B in batches of %d", side.name, n, size, serverBigBatch)
		w := StartWindow()
		var err error
		phase(ctx, "get-batch-"+side.name, func(ctx context.Context) {
			res[i], err = runPool(1, jobs, func(_, j int) error {
				lo, hi := j*serverBigBatch, min((j+1)*serverBigBatch, n)
				batch := make([]asl.Reference, hi-lo)
				for k := range batch {
					batch[k] = getRefs[order[lo+k]]
				}
				return asl.GetBatch(ctx, side.clients[0], batch, 0, func(k int, a asl.Artifact, err error) error {
					if err == nil && len(a.Bytes) != size {
						err = fmt.Errorf("%s: %d bytes, want %d", batch[k], len(a.Bytes), size)
					}
					return err
				})
			}, nil)
		})
		if i == 1 {
			rss, _ = w.Stop()
		} else {
			w.Stop()
		}
		if err != nil {
			return nil, fmt.Errorf("server/get-batch: %s: %w", side.name, err)
		}
	}
	rows = append(rows, Row{
		Name:     "server/get-batch",
		Figure:   Quantity{perSec(n, res[1].d), "artifacts/s"},
		Baseline: &Baseline{perSec(n, res[0].d), "artifacts/s", "embedded Get of each, 1 client"},
		PeakRSS:  rss,
		Target:   &Target{">= 0.5x baseline", OnRatio, AtLeast, 0.5},
		Note: fmt.Sprintf("asl.GetBatch of all %d in a shuffled order, %d references per call, 1 client: one POST /v1/artifacts/batch-read per call through the server (verified by the store, re-hashed by the client), one verified Get each on the embedded store; server %s, embedded %s",
			n, serverBigBatch, res[1].d.Round(time.Millisecond), res[0].d.Round(time.Millisecond)),
	})
	return rows, nil
}

// serverRuns times surface runs of SurfaceProgram (NoCache, fresh inputs)
// through POST /v1/pel/run against surf.Surface.Run, interleaved.
func serverRuns(ctx context.Context, e *Env, emb *pebblestore.Store, rig *serverRig, c *httpstore.Client) ([]Row, error) {
	runs := e.Sizes.SurfaceRuns
	prog, err := pel.ProgramArtifact(SurfaceProgram())
	if err != nil {
		return nil, err
	}
	progRef, err := asl.PutArtifact(ctx, emb, asl.HashSHA256, prog)
	if err != nil {
		return nil, err
	}
	if r, err := asl.PutArtifact(ctx, c, asl.HashSHA256, prog); err != nil || r != progRef {
		return nil, fmt.Errorf("program put through the server: %s, %v", r, err)
	}
	fresh := surf.New(emb, surf.Options{NoCache: true})
	e.logf("server: %d runs of a %d-node program through POST /v1/pel/run and on the embedded surface, interleaved", runs, len(SurfaceProgram().Nodes))
	var dEmb, dSrv []time.Duration
	w := StartWindow()
	for i := range runs {
		ins := surfaceInputs(1_000_000 + i)
		refs, err := emb.PutBatch(ctx, asl.HashSHA256, ins)
		if err != nil {
			return nil, err
		}
		if r2, err := c.PutBatch(ctx, asl.HashSHA256, ins); err != nil || !slices.Equal(refs, r2) {
			return nil, fmt.Errorf("inputs put through the server: %v", err)
		}
		var embRun *surf.Run
		embedded := func() error {
			t := time.Now()
			var err error
			phase(ctx, "run-embedded", func(ctx context.Context) {
				embRun, err = fresh.Run(ctx, surf.Request{ProgramRef: progRef, InputRefs: refs})
			})
			dEmb = append(dEmb, time.Since(t))
			if err == nil && embRun.Result.Value.Status != pel.StatusOK {
				err = fmt.Errorf("embedded run: status %s", embRun.Result.Value.Status)
			}
			return err
		}
		var rep report.Run
		served := func() error {
			t := time.Now()
			var err error
			phase(ctx, "run-server", func(ctx context.Context) {
				err = c.DoJSON(ctx, http.MethodPost, "/v1/pel/run", true,
					report.RunRequest{ProgramRef: progRef, InputRefs: refs, NoCache: true}, &rep)
			})
			dSrv = append(dSrv, time.Since(t))
			if err == nil && rep.Status != pel.StatusOK.String() {
				err = fmt.Errorf("server run: status %s", rep.Status)
			}
			return err
		}
		first, second := embedded, served
		if i%2 == 1 {
			first, second = served, embedded
		}
		if err := first(); err != nil {
			return nil, err
		}
		if err := second(); err != nil {
			return nil, err
		}
		if rep.ResultRef != embRun.ResultRef || rep.TraceRef != embRun.TraceRef || !slices.Equal(rep.OutputRefs, embRun.OutputRefs) {
			return nil, fmt.Errorf("run %d: the server's result %s differs from the embedded surface's %s", i, rep.ResultRef, embRun.ResultRef)
		}
	}
	rss, _ := w.Stop()
	return []Row{
		{
			Name:     "server/run-p50",
			Figure:   Quantity{percentileMS(dSrv, 50), "ms"},
			Baseline: &Baseline{percentileMS(dEmb, 50), "ms", "embedded surf.Surface.Run, p50"},
			PeakRSS:  rss,
			Note: fmt.Sprintf("%d runs (NoCache, fresh 1 KiB inputs each) of the surface group's %d-node program: POST /v1/pel/run with a report.RunRequest through httpstore.Client.DoJSON, answered when the server's run is stored, against surf.Surface.Run on the embedded store, alternating which goes first; the references of both are checked equal",
				runs, len(SurfaceProgram().Nodes)),
		},
		{
			Name:     "server/run-p99",
			Figure:   Quantity{percentileMS(dSrv, 99), "ms"},
			Baseline: &Baseline{percentileMS(dEmb, 99), "ms", "embedded surf.Surface.Run, p99"},
			PeakRSS:  rss,
			Note:     fmt.Sprintf("same runs; max %s ms through the server, %s ms embedded", formatValue(percentileMS(dSrv, 100)), formatValue(percentileMS(dEmb, 100))),
		},
	}, nil
}

// Operations of the load test.
const (
	opPut = iota
	opBatch
	opGet
	opHas
	opRun
	nLoadOps
)

var loadOpNames = [nLoadOps]string{"put", "batch", "get", "has", "run"}

// loadOp draws an operation: put 25 %, batch put of 8 5 %, get 40 %, has
// 20 %, run 10 %.
func loadOp(rng *rand.Rand) int {
	switch r := rng.IntN(100); {
	case r < 25:
		return opPut
	case r < 30:
		return opBatch
	case r < 70:
		return opGet
	case r < 90:
		return opHas
	}
	return opRun
}

// loadTarget is what the load test drives: the embedded store and surface,
// or the server through one shared client.
type loadTarget interface {
	asl.Store
	run(ctx context.Context, req report.RunRequest) (report.Run, error)
}

type embeddedTarget struct{ *pebblestore.Store }

func (t embeddedTarget) run(ctx context.Context, req report.RunRequest) (report.Run, error) {
	r, err := surf.New(t.Store, surf.Options{NoCache: req.NoCache}).Run(ctx, req.Surface())
	if err != nil {
		return report.Run{}, err
	}
	return report.NewRun(r, req.NoCache), nil
}

type serverTarget struct{ *httpstore.Client }

func (t serverTarget) run(ctx context.Context, req report.RunRequest) (report.Run, error) {
	var rep report.Run
	err := t.DoJSON(ctx, http.MethodPost, "/v1/pel/run", true, req, &rep)
	return rep, err
}

// loadArt is an artifact the load test saw acknowledged: its bytes are
// FillRandom(size bytes, serverLoadSeed, key).
type loadArt struct {
	ref  asl.Reference
	key  uint64
	size int
}

// loadResult is one side's outcome.
type loadResult struct {
	d        time.Duration
	ops      [nLoadOps]int64
	lat      [nLoadOps][]time.Duration
	requests int64 // operations answered or failed
	errors   int64 // operations that failed
	wrong    int64 // answers that were wrong: bytes, presence, run results
	samples  []string
	runsSeen int // distinct run requests whose answers were compared
}

func (r *loadResult) total() int64 { return r.requests }

// loadState is what the workers of one side share.
type loadState struct {
	t        loadTarget
	progRef  asl.Reference
	mu       sync.RWMutex
	acked    []loadArt
	pairs    [][2]loadArt
	runsMu   sync.Mutex
	runs     map[int]report.Run // pair index: the first answer
	errors   atomic.Int64
	wrong    atomic.Int64
	sampleMu sync.Mutex
	samples  []string
}

func (s *loadState) note(kind string, err error) {
	s.sampleMu.Lock()
	defer s.sampleMu.Unlock()
	if len(s.samples) < 3 {
		s.samples = append(s.samples, kind+": "+oneLineText(err.Error()))
	}
}

func oneLineText(s string) string { return strings.Join(strings.Fields(s), " ") }

func (s *loadState) pick(rng *rand.Rand) loadArt {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.acked[rng.IntN(len(s.acked))]
}

func (s *loadState) add(a ...loadArt) {
	s.mu.Lock()
	s.acked = append(s.acked, a...)
	s.mu.Unlock()
}

// loadBytes returns the bytes of key, size long, in buf.
func loadBytes(buf []byte, key uint64, size int) []byte {
	p := buf[:size]
	FillRandom(p, serverLoadSeed, key)
	return p
}

// loadWorker runs operations until the deadline and returns their counts
// and latencies.
func (s *loadState) worker(ctx context.Context, w int, deadline time.Time) (ops [nLoadOps]int64, lat [nLoadOps][]time.Duration) {
	rng := rand.New(rand.NewPCG(serverLoadSeed, uint64(w)))
	put := make([]byte, 64<<10)
	want := make([]byte, 64<<10)
	want2 := make([]byte, 64<<10)
	seq := uint64(0)
	nextKey := func() uint64 { seq++; return 1<<40 | uint64(w)<<24 | seq }
	size := func() int { return 1<<10 + rng.IntN(63<<10+1) }
	fail := func(kind string, err error) { s.errors.Add(1); s.note(kind, err) }
	wrong := func(kind string, err error) { s.wrong.Add(1); s.note(kind, err) }
	for time.Now().Before(deadline) {
		op := loadOp(rng)
		t := time.Now()
		switch op {
		case opPut:
			key, n := nextKey(), size()
			a := asl.Untagged(loadBytes(put, key, n))
			ref, err := asl.PutArtifact(ctx, s.t, asl.HashSHA256, a)
			if err != nil {
				fail("put", err)
				break
			}
			if d, _ := asl.Derive(asl.HashSHA256, a); d != ref {
				wrong("put", fmt.Errorf("acknowledged %s for an artifact that hashes to %s", ref, d))
				break
			}
			s.add(loadArt{ref, key, n})
		case opBatch:
			// 8 artifacts of 1-8 KiB, generated into one buffer.
			arts := make([]asl.Artifact, 8)
			meta := make([]loadArt, 8)
			off := 0
			for i := range arts {
				key, n := nextKey(), 1<<10+rng.IntN(7<<10+1)
				arts[i] = asl.Untagged(loadBytes(put[off:], key, n))
				meta[i] = loadArt{key: key, size: n}
				off += n
			}
			refs, err := s.t.PutBatch(ctx, asl.HashSHA256, arts)
			if err != nil {
				fail("batch", err)
				break
			}
			if len(refs) != len(arts) {
				wrong("batch", fmt.Errorf("%d references for %d artifacts", len(refs), len(arts)))
				break
			}
			for i := range arts {
				if d, _ := asl.Derive(asl.HashSHA256, arts[i]); d != refs[i] {
					wrong("batch", fmt.Errorf("artifact %d: acknowledged %s, hashes to %s", i, refs[i], d))
					continue
				}
				meta[i].ref = refs[i]
			}
			s.add(meta...)
		case opGet:
			a := s.pick(rng)
			got, err := asl.Get(ctx, s.t, a.ref, 0)
			if err != nil {
				fail("get", err)
				break
			}
			if !bytes.Equal(got.Bytes, loadBytes(want, a.key, a.size)) || got.HasTag {
				wrong("get", fmt.Errorf("%s: wrong bytes (%d, want %d)", a.ref, len(got.Bytes), a.size))
			}
		case opHas:
			var ref asl.Reference
			present := rng.IntN(2) == 0
			if present {
				ref = s.pick(rng).ref
			} else {
				// An artifact no worker ever puts (another seed).
				p := put[:64]
				FillRandom(p, serverLoadSeed+1, rng.Uint64())
				ref, _ = asl.Derive(asl.HashSHA256, asl.Untagged(p))
			}
			ok, err := asl.Has(ctx, s.t, ref)
			if err != nil {
				fail("has", err)
				break
			}
			if ok != present {
				wrong("has", fmt.Errorf("%s: present %v, want %v", ref, ok, present))
			}
		case opRun:
			k := rng.IntN(len(s.pairs))
			pr := s.pairs[k]
			rep, err := s.t.run(ctx, report.RunRequest{ProgramRef: s.progRef, InputRefs: []asl.Reference{pr[0].ref, pr[1].ref},
				NoCache: rng.IntN(4) == 0})
			if err != nil {
				fail("run", err)
				break
			}
			if rep.Status != pel.StatusOK.String() || len(rep.OutputRefs) != 1 {
				wrong("run", fmt.Errorf("pair %d: status %s, %d outputs", k, rep.Status, len(rep.OutputRefs)))
				break
			}
			s.runsMu.Lock()
			first, seen := s.runs[k]
			if !seen {
				s.runs[k] = rep
			}
			s.runsMu.Unlock()
			if seen {
				if rep.ResultRef != first.ResultRef || rep.TraceRef != first.TraceRef || !slices.Equal(rep.OutputRefs, first.OutputRefs) {
					wrong("run", fmt.Errorf("pair %d: result %s, an earlier run gave %s", k, rep.ResultRef, first.ResultRef))
				}
				break
			}
			// The first answer for a pair: its output is the concatenation.
			out, err := asl.Get(ctx, s.t, rep.OutputRefs[0], 0)
			if err != nil {
				fail("run", fmt.Errorf("output of pair %d: %w", k, err))
				break
			}
			cat := append(slices.Clone(loadBytes(want, pr[0].key, pr[0].size)), loadBytes(want2, pr[1].key, pr[1].size)...)
			if !bytes.Equal(out.Bytes, cat) {
				wrong("run", fmt.Errorf("pair %d: output %s is not the concatenation of the inputs", k, rep.OutputRefs[0]))
			}
		}
		ops[op]++
		lat[op] = append(lat[op], time.Since(t))
	}
	return ops, lat
}

// runLoad runs the load test on one side: 64 workers for d.
func runLoad(ctx context.Context, t loadTarget, d time.Duration) (loadResult, error) {
	s := &loadState{t: t, runs: map[int]report.Run{}}
	prog, err := pel.SeedArtifact(pel.SeedConcat)
	if err != nil {
		return loadResult{}, err
	}
	if s.progRef, err = asl.PutArtifact(ctx, t, asl.HashSHA256, prog); err != nil {
		return loadResult{}, err
	}
	// 64 artifacts acknowledged before the clock starts, so gets and runs
	// have something from the first operation; the run pairs are theirs.
	buf := make([]byte, 64<<10)
	for k := range 64 {
		n := 1<<10 + k*(1<<10)
		ref, err := asl.PutArtifact(ctx, t, asl.HashSHA256, asl.Untagged(loadBytes(buf, uint64(k), n)))
		if err != nil {
			return loadResult{}, err
		}
		s.acked = append(s.acked, loadArt{ref, uint64(k), n})
	}
	for k := 0; k+1 < 32; k += 2 {
		s.pairs = append(s.pairs, [2]loadArt{s.acked[k], s.acked[k+1]})
	}
	var (
		wg  sync.WaitGroup
		res loadResult
		mu  sync.Mutex
	)
	start := time.Now()
	deadline := start.Add(d)
	for w := range serverLoadClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ops, lat := s.worker(ctx, w, deadline)
			mu.Lock()
			defer mu.Unlock()
			for i := range ops {
				res.ops[i] += ops[i]
				res.lat[i] = append(res.lat[i], lat[i]...)
			}
		}()
	}
	wg.Wait()
	res.d = time.Since(start)
	for _, n := range res.ops {
		res.requests += n
	}
	res.errors, res.wrong, res.samples, res.runsSeen = s.errors.Load(), s.wrong.Load(), s.samples, len(s.runs)
	return res, nil
}

// opsText gives the count and p50/p99 of each operation.
func (r *loadResult) opsText() string {
	parts := make([]string, nLoadOps)
	for i, name := range loadOpNames {
		p := pool{lat: r.lat[i]}
		parts[i] = fmt.Sprintf("%s %s (%s)", name, formatValue(float64(r.ops[i])), p.latText())
	}
	return strings.Join(parts, "; ")
}

func (r *loadResult) samplesText() string {
	if len(r.samples) == 0 {
		return "none"
	}
	return strings.Join(r.samples, " | ")
}

// serverLoad runs the load test through the server (64 goroutines sharing
// one httpstore.Client whose transport keeps up to 64 idle connections),
// then the same workload on the embedded store.
func serverLoad(ctx context.Context, e *Env, emb *pebblestore.Store, rig *serverRig) ([]Row, error) {
	d := serverLoadDuration(e.Sizes)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = serverLoadClients
	defer tr.CloseIdleConnections()
	c, err := httpstore.Open(ctx, rig.url, httpstore.Options{HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	e.logf("server: load test, %d clients for %s through the server: put, batch put, get, has, run", serverLoadClients, d)
	before := rig.statusCounts()
	w := StartWindow()
	var srv loadResult
	phase(ctx, "load-server", func(ctx context.Context) { srv, err = runLoad(ctx, serverTarget{c}, d) })
	rss, _ := w.Stop()
	if err != nil {
		return nil, err
	}
	codes := countsText(before, rig.statusCounts())
	e.logf("server: load test, %d clients for %s on the embedded store", serverLoadClients, d)
	var base loadResult
	phase(ctx, "load-embedded", func(ctx context.Context) { base, err = runLoad(ctx, embeddedTarget{emb}, d) })
	if err != nil {
		return nil, err
	}
	checked := &Baseline{float64(srv.total()), "requests", "requests checked (server)"}
	return []Row{
		{
			Name:     "server/load-rate",
			Figure:   Quantity{perSec(int(srv.total()), srv.d), "requests/s"},
			Baseline: &Baseline{perSec(int(base.total()), base.d), "requests/s", "same mix, embedded store"},
			PeakRSS:  rss,
			Note: fmt.Sprintf("%d goroutines sharing one httpstore.Client (transport: up to %d idle connections) for %s, each request drawn from put 25 %% (1-64 KiB), batch put of 8 5 %% (1-8 KiB each), get 40 %% (an acknowledged artifact, bytes compared), has 20 %% (half present, half never put), run 10 %% (concat seed on one of %d input pairs, a quarter NoCache; results compared across repeats, the first output compared with the inputs); %s requests in %s: %s; the server answered %s; embedded: %s requests in %s, %s errors, %s wrong",
				serverLoadClients, serverLoadClients, d, 16, formatValue(float64(srv.total())), srv.d.Round(time.Millisecond), srv.opsText(), codes,
				formatValue(float64(base.total())), base.d.Round(time.Millisecond), formatValue(float64(base.errors)), formatValue(float64(base.wrong))),
		},
		{
			Name:     "server/load-errors",
			Figure:   Quantity{float64(srv.errors), "errors"},
			Baseline: checked,
			Target:   &Target{"= 0", OnFigure, AtMost, 0},
			PeakRSS:  rss,
			Note:     fmt.Sprintf("requests that failed after the client's retries (429/502/503/504 and connection errors are retried); first errors: %s", srv.samplesText()),
		},
		{
			Name:     "server/load-wrong",
			Figure:   Quantity{float64(srv.wrong), "answers"},
			Baseline: checked,
			Target:   &Target{"= 0", OnFigure, AtMost, 0},
			PeakRSS:  rss,
			Note:     fmt.Sprintf("wrong answers: bytes that differ from what was put, a wrong presence, a put acknowledged under another reference, a run whose result differs from an earlier run of the same request (%d requests compared) or whose output is not the concatenation", srv.runsSeen),
		},
	}, nil
}

// serveProc is an `amduat serve` child process.
type serveProc struct {
	cmd    *exec.Cmd
	url    string
	stderr *bytes.Buffer
	hwm    *hwmWatch
}

// startServe starts `amduat serve` on store at a loopback port and waits
// until it listens.
func startServe(ctx context.Context, bin, store string) (*serveProc, error) {
	return startServeEnv(ctx, bin, store, nil)
}

// startServeEnv is startServe with env added to the child's environment.
func startServeEnv(ctx context.Context, bin, store string, env []string) (*serveProc, error) {
	cmd := exec.CommandContext(ctx, bin, "--json", "--store", store, "serve", "--listen", "127.0.0.1:0")
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &serveProc{cmd: cmd, stderr: &bytes.Buffer{}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadBytes('\n')
	var info struct {
		URL string `json:"url"`
	}
	if err == nil {
		err = json.Unmarshal(line, &info)
	}
	if err != nil || info.URL == "" {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("amduat serve did not report its address (%v): %s", err, strings.TrimSpace(p.stderr.String()))
	}
	p.url = info.URL
	p.hwm = watchHWM(cmd.Process.Pid)
	return p, nil
}

// stop ends the server gracefully (SIGTERM, where signals exist) and
// returns its peak RSS until then.
func (p *serveProc) stop() (*int64, error) {
	peak := p.hwm.stop(true)
	killed := false
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.cmd.Process.Kill() // no SIGTERM here (Windows)
		killed = true
	}
	if err := p.cmd.Wait(); err != nil && !killed {
		return nil, fmt.Errorf("amduat serve: %w: %s", err, strings.TrimSpace(p.stderr.String()))
	}
	if peak == nil {
		peak = ChildMaxRSS(p.cmd.ProcessState)
	}
	return peak, nil
}

// hwmWatch follows a child process's own peak RSS: VmHWM of
// /proc/PID/status, read every 5 ms while the child lives. (The child's
// getrusage ru_maxrss is no good here: os/exec starts a child with
// vfork, and Linux carries the parent's peak RSS at exec into the child's
// ru_maxrss, so a child of this process would report at least this
// process's peak.) VmHWM only grows, so the last reading misses only what
// the child reached in its last 5 ms.
type hwmWatch struct {
	path  string
	stopc chan struct{}
	done  chan struct{}
	peak  atomic.Int64
}

func watchHWM(pid int) *hwmWatch {
	w := &hwmWatch{path: fmt.Sprintf("/proc/%d/status", pid), stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			w.read()
			select {
			case <-w.stopc:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

func (w *hwmWatch) read() {
	b, err := os.ReadFile(w.path)
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err == nil && kb<<10 > w.peak.Load() {
				w.peak.Store(kb << 10)
			}
		}
	}
}

// stop ends the watch and returns the peak, or nil when /proc gave none;
// alive takes a last reading, for a child not yet reaped (once reaped, its
// pid may name another process).
func (w *hwmWatch) stop(alive bool) *int64 {
	close(w.stopc)
	<-w.done
	if alive {
		w.read()
	}
	if v := w.peak.Load(); v > 0 {
		return &v
	}
	return nil
}

// runChild runs cmd, times it from start to exit and follows its peak RSS
// (hwmWatch; ChildMaxRSS where /proc is missing). Its stdout is returned
// when keep is set, else discarded (the null device).
func runChild(cmd *exec.Cmd, keep bool) (procRun, error) {
	var out, errb bytes.Buffer
	if keep {
		cmd.Stdout = &out
	}
	cmd.Stderr = &errb
	d, peak, err := runMeasured(cmd)
	if err != nil {
		return procRun{}, fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(errb.String()))
	}
	return procRun{d: d, maxRSS: peak, stdout: out.Bytes()}, nil
}

// serverLargeInProcess puts and gets one large random artifact through
// the in-process server (httpstore.Client.Put of the generated stream,
// Fetch read to EOF) and on the embedded store, in the order embedded put,
// server put, server get, embedded get.
func serverLargeInProcess(ctx context.Context, e *Env, emb *pebblestore.Store, c *httpstore.Client) ([]Row, asl.Reference, error) {
	size := e.Sizes.LargeBytes
	label := sizeText(size) + " random"
	type step struct {
		d   time.Duration
		rss *int64
	}
	var (
		ref  [2]asl.Reference
		puts [2]step
		gets [2]step
	)
	stores := [2]asl.Store{emb, c}
	names := [2]string{"embedded", "server"}
	put := func(i int) error {
		e.logf("server: %s: Put of %s", names[i], label)
		w := StartWindow()
		var err error
		phase(ctx, "large-put-"+names[i], func(ctx context.Context) {
			ref[i], puts[i].d, err = PutLarge(ctx, stores[i], Random, serverSeed, size)
		})
		puts[i].rss, _ = w.Stop()
		return err
	}
	// Each side's get runs twice, alternating; the faster of each counts.
	var getAll [2][]time.Duration
	get := func(i int) error {
		e.logf("server: %s: Fetch of %s", names[i], label)
		w := StartWindow()
		var (
			d   time.Duration
			err error
		)
		phase(ctx, "large-get-"+names[i], func(ctx context.Context) { d, err = GetLarge(ctx, stores[i], ref[0], size) })
		rss, _ := w.Stop()
		getAll[i] = append(getAll[i], d)
		if gets[i].d == 0 || d < gets[i].d {
			gets[i].d = d
		}
		if rss != nil && (gets[i].rss == nil || *rss > *gets[i].rss) {
			gets[i].rss = rss
		}
		return err
	}
	for _, f := range []func() error{func() error { return put(0) }, func() error { return put(1) },
		func() error { return get(1) }, func() error { return get(0) }, func() error { return get(1) }, func() error { return get(0) }} {
		if err := f(); err != nil {
			return nil, asl.Reference{}, err
		}
		if ref[1] != (asl.Reference{}) && ref[1] != ref[0] {
			return nil, asl.Reference{}, fmt.Errorf("large put: the server acknowledged %s, the embedded store %s", ref[1], ref[0])
		}
	}
	return []Row{
		{
			Name:     "server/large-put",
			Figure:   Quantity{mibPerSec(size, puts[1].d), "MiB/s"},
			Baseline: &Baseline{mibPerSec(size, puts[0].d), "MiB/s", "embedded Put, same stream"},
			PeakRSS:  puts[1].rss,
			Note: fmt.Sprintf("httpstore.Client.Put of a generated %s stream (hashed by the client as it streams, Content-Length known) through the in-process server, durable when acknowledged: %s; the embedded store's Put of the same stream just before: %s; peak RSS: this process, client and server together (the processes' own in the rss rows)",
				label, puts[1].d.Round(time.Millisecond), puts[0].d.Round(time.Millisecond)),
		},
		{
			Name:     "server/large-get",
			Figure:   Quantity{mibPerSec(size, gets[1].d), "MiB/s"},
			Baseline: &Baseline{mibPerSec(size, gets[0].d), "MiB/s", "embedded Fetch, same artifact"},
			Target:   &Target{">= 0.7x baseline", OnRatio, AtLeast, 0.7},
			PeakRSS:  gets[1].rss,
			Note: fmt.Sprintf("httpstore.Client.Fetch read to EOF of %s through the in-process server (the server checks each chunk as it reads, the client re-hashes every byte, X-Amduat-Verify), against the embedded store's Fetch of it, alternating, twice each, the faster of each: server %s / %s, embedded %s / %s",
				label, getAll[1][0].Round(time.Millisecond), getAll[1][1].Round(time.Millisecond), getAll[0][0].Round(time.Millisecond), getAll[0][1].Round(time.Millisecond)),
		},
	}, ref[0], nil
}

// serverLargeProcesses puts and gets one large random artifact with the
// amduat command through an `amduat serve` child process and on a store
// directory, for the peak RSS of each process: put embedded, put served,
// get served, get embedded, with a fresh server process for the put and
// for the get.
func serverLargeProcesses(ctx context.Context, e *Env, dir string) ([]Row, error) {
	size := e.Sizes.LargeBytes
	label := sizeText(size) + " random"
	names := []string{"large-put-rss-server", "large-put-rss-client", "large-get-rss-server", "large-get-rss-client"}
	if e.AmduatBin == "" {
		rows := make([]Row, len(names))
		for i, n := range names {
			rows[i] = Row{Name: "server/" + n, Figure: Quantity{0, "MiB"}, Skipped: true, Note: "no amduat executable to run"}
		}
		return rows, nil
	}
	file := filepath.Join(dir, "large")
	e.logf("server: writing %s to a file", label)
	if err := writeStream(file, NewStream(Random, serverSeed, size)); err != nil {
		return nil, err
	}
	want, err := HashStream(Random, serverSeed, size)
	if err != nil {
		return nil, err
	}
	bin := e.AmduatBin
	embStore, srvStore := filepath.Join(dir, "large-embedded"), filepath.Join(dir, "large-served")
	for _, s := range []string{embStore, srvStore} {
		if _, err := runChild(exec.CommandContext(ctx, bin, "--store", s, "init"), false); err != nil {
			return nil, err
		}
	}
	put := func(store string) (procRun, error) {
		r, err := runChild(exec.CommandContext(ctx, bin, "--store", store, "put", file), true)
		if err == nil && strings.TrimSpace(string(r.stdout)) != want.Ref.String() {
			err = fmt.Errorf("amduat put printed %q, want %s", strings.TrimSpace(string(r.stdout)), want.Ref)
		}
		return r, err
	}
	get := func(store string) (procRun, error) {
		return runChild(exec.CommandContext(ctx, bin, "--store", store, "get", want.Ref.String()), false)
	}
	e.logf("server: amduat put of %s, embedded store (process)", label)
	putEmb, err := put(embStore)
	if err != nil {
		return nil, err
	}
	e.logf("server: amduat put of %s through amduat serve (processes)", label)
	sp, err := startServe(ctx, bin, srvStore)
	if err != nil {
		return nil, err
	}
	putSrv, err := put(sp.url)
	rssPutSrv, serr := sp.stop()
	if err = errors.Join(err, serr); err != nil {
		return nil, err
	}
	e.logf("server: amduat get of %s through amduat serve (processes)", label)
	if sp, err = startServe(ctx, bin, srvStore); err != nil {
		return nil, err
	}
	getSrv, err := get(sp.url)
	rssGetSrv, serr := sp.stop()
	if err = errors.Join(err, serr); err != nil {
		return nil, err
	}
	e.logf("server: amduat get of %s, embedded store (process)", label)
	getEmb, err := get(embStore)
	if err != nil {
		return nil, err
	}
	os.RemoveAll(embStore)
	os.RemoveAll(srvStore)
	os.Remove(file)

	timing := func(srv, emb procRun, what string) string {
		return fmt.Sprintf("%s of %s, process start to exit: %s through amduat serve (%s MiB/s), %s on a store directory (%s MiB/s)",
			what, label, srv.d.Round(time.Millisecond), formatValue(mibPerSec(size, srv.d)), emb.d.Round(time.Millisecond), formatValue(mibPerSec(size, emb.d)))
	}
	rssRow := func(name string, rss, base *int64, what, when string) Row {
		r := Row{Name: "server/" + name, Figure: Quantity{mibOf(rss), "MiB"}, PeakRSS: rss,
			Target: &Target{fmt.Sprintf("<= %d MiB", rssTarget), OnFigure, AtMost, rssTarget},
			Note:   "peak RSS of the " + what + " process (its VmHWM, read every 5 ms while it runs); " + when}
		if base != nil {
			r.Baseline = &Baseline{mibOf(base), "MiB", "embedded amduat process, same command"}
		}
		if rss == nil {
			r.Skipped, r.Note = true, "peak RSS of a child process cannot be measured on this system"
		}
		return r
	}
	putWhen := timing(putSrv, putEmb, "amduat --store URL put FILE (a file in the page cache)")
	getWhen := timing(getSrv, getEmb, "amduat --store URL get REF to the null device")
	return []Row{
		rssRow("large-put-rss-server", rssPutSrv, putEmb.maxRSS, "amduat serve", "a fresh server for the put; "+putWhen),
		rssRow("large-put-rss-client", putSrv.maxRSS, putEmb.maxRSS, "amduat put client", putWhen),
		rssRow("large-get-rss-server", rssGetSrv, getEmb.maxRSS, "amduat serve", "a fresh server for the get; "+getWhen),
		rssRow("large-get-rss-client", getSrv.maxRSS, getEmb.maxRSS, "amduat get client", getWhen),
	}, nil
}

// writeStream writes r to a new file at path.
func writeStream(path string, r io.Reader) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.CopyBuffer(f, r, make([]byte, streamBuf)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
