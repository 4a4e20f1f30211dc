package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/report"
	"github.com/amduat/amduat/surf"
	"github.com/amduat/amduat/tgk"
)

// maxShowArtifact bounds the PEL artifact GET /v1/pel/show reads into
// memory.
const maxShowArtifact = 256 << 20

// buildProgram is POST /v1/pel/programs: a JSON program (SPECS.md §15) in,
// the stored program's `pel build --json` object out.
func (s *Server) buildProgram(w http.ResponseWriter, r *http.Request) error {
	id, err := hashParam(r, s.store.DefaultHash())
	if err != nil {
		return err
	}
	data, err := io.ReadAll(s.body(w, r, s.limits.MaxJSONBytes))
	if err != nil {
		return err
	}
	p, err := pel.ProgramFromJSON(data, s.ops)
	if err != nil {
		return badRequest("JSON program: %v", err)
	}
	art, err := pel.ProgramArtifact(p)
	if err != nil {
		return badRequest("JSON program: %v", err)
	}
	ref, err := asl.PutArtifact(r.Context(), s.store, id, art)
	if err != nil {
		return err
	}
	s.metrics.puts.Add(1)
	s.metrics.putBytes.Add(float64(len(art.Bytes)))
	s.evict.touch(ref)
	s.evict.wrote(int64(len(art.Bytes)), false)
	return writeJSON(w, report.NewBuild(ref, art, p, s.ops))
}

// acquireRun takes a run slot, waiting in the run queue while all are busy
// (SPECS.md §18.6); it refuses with 429 when the queue is full and with 503
// when the wait expires, both with Retry-After (errors.go).
func (s *Server) acquireRun(ctx context.Context) (release func(), err error) {
	release, waited, err := s.runs.acquire(ctx)
	switch {
	case err == nil:
		s.metrics.queueWait.Observe(waited.Seconds())
		return release, nil
	case errors.Is(err, errQueueFull):
		s.metrics.queueRefused.WithLabelValues("full").Inc()
		return nil, &httpError{http.StatusTooManyRequests, httpstore.CodeTooManyRequests,
			fmt.Sprintf("all %d run slots are busy and %d runs wait for one; retry later", s.limits.MaxConcurrentRuns, s.limits.RunQueueLength)}
	case errors.Is(err, errQueueTimeout):
		s.metrics.queueRefused.WithLabelValues("timeout").Inc()
		return nil, &httpError{http.StatusServiceUnavailable, httpstore.CodeUnavailable,
			fmt.Sprintf("no run slot came free within %s (all %d busy); retry later", s.limits.RunQueueWait, s.limits.MaxConcurrentRuns)}
	}
	return nil, err
}

// runContext bounds a run by the request's timeout, capped by the server's.
func (s *Server) runContext(ctx context.Context, millis int64) (context.Context, context.CancelFunc, time.Duration) {
	d := s.limits.RunTimeout
	if millis > 0 && time.Duration(millis)*time.Millisecond < d {
		d = time.Duration(millis) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	return ctx, cancel, d
}

// run is POST /v1/pel/run: the surface run of `pel run`, on the server, so
// its action cache, node memo and provenance are the store's.
func (s *Server) run(w http.ResponseWriter, r *http.Request) error {
	var req report.RunRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.ProgramRef.IsZero() {
		return badRequest("program_ref is required")
	}
	if req.TimeoutMillis < 0 {
		return badRequest("timeout_ms %d: want 0 (the server's bound) or more", req.TimeoutMillis)
	}
	for i, ref := range req.InputRefs {
		if ref.IsZero() {
			return &httpError{http.StatusBadRequest, httpstore.CodeBadReference, fmt.Sprintf("input_refs[%d]: null is not a reference", i)}
		}
	}
	id := s.store.DefaultHash()
	if req.Hash != "" {
		alg, err := asl.HashByName(req.Hash)
		if err != nil {
			return &httpError{http.StatusBadRequest, httpstore.CodeUnsupported, fmt.Sprintf("hash %q: %v", req.Hash, err)}
		}
		id = alg.ID
	}
	longRequest(w) // the wait for a slot and the run may outlast the idle timeout
	release, err := s.acquireRun(r.Context())
	if err != nil {
		return err
	}
	defer release()
	ctx, cancel, bound := s.runContext(r.Context(), req.TimeoutMillis)
	defer cancel()
	s.maint.RLock()
	defer s.maint.RUnlock()
	run, err := surf.New(s.store, surf.Options{Hash: id, Registry: s.ops, NoCache: req.NoCache, NodeMemo: req.MemoNodes, MemoryBudget: s.limits.RunMemoryBudget, WorkBudget: s.limits.RunWorkBudget, Workers: s.limits.RunWorkers, Salts: &s.salts}).Run(ctx, req.Surface())
	if err != nil {
		s.metrics.runs.WithLabelValues("error").Inc()
		if errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil {
			return &httpError{http.StatusGatewayTimeout, httpstore.CodeTimeout,
				fmt.Sprintf("program %s: wall-time bound %s exceeded; nothing stored", req.ProgramRef, bound)}
		}
		return fmt.Errorf("program %s: %w", req.ProgramRef, err)
	}
	rep := report.NewRun(run, req.NoCache)
	s.evict.touch(req.ProgramRef)
	if req.ParamsRef != nil {
		s.evict.touch(*req.ParamsRef)
	}
	s.evict.touch(req.InputRefs...)
	s.evict.touch(rep.ResultRef, rep.TraceRef)
	s.evict.touch(rep.OutputRefs...)
	s.evict.wrote(0, true)
	s.metrics.runs.WithLabelValues(rep.Status).Inc()
	s.metrics.cache.WithLabelValues(rep.Cache).Inc()
	return writeJSON(w, rep)
}

// verify is POST /v1/pel/verify: replay a stored run (SPECS.md §14.8).
func (s *Server) verify(w http.ResponseWriter, r *http.Request) error {
	var req report.VerifyRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.ResultRef.IsZero() {
		return badRequest("result_ref is required")
	}
	art, err := asl.Get(r.Context(), s.store, req.ResultRef, maxShowArtifact)
	if err != nil {
		return err
	}
	if _, err := surf.DecodeResultArtifact(art); err != nil {
		return &httpError{http.StatusUnprocessableEntity, httpstore.CodeBadRequest, fmt.Sprintf("%s: result artifact does not decode: %v", req.ResultRef, err)}
	}
	longRequest(w) // the wait for a slot and the run may outlast the idle timeout
	release, err := s.acquireRun(r.Context())
	if err != nil {
		return err
	}
	defer release()
	ctx, cancel, bound := s.runContext(r.Context(), 0)
	defer cancel()
	v, err := surf.New(s.store, surf.Options{Registry: s.ops}).Verify(ctx, req.ResultRef)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil {
			return &httpError{http.StatusGatewayTimeout, httpstore.CodeTimeout,
				fmt.Sprintf("replay of %s: wall-time bound %s exceeded", req.ResultRef, bound)}
		}
		return fmt.Errorf("%s: %w", req.ResultRef, err)
	}
	return writeJSON(w, report.NewVerification(req.ResultRef, v))
}

// show is GET /v1/pel/show/REF: the `pel show --json` object.
func (s *Server) show(w http.ResponseWriter, r *http.Request) error {
	ref, err := parseRefParam(r)
	if err != nil {
		return err
	}
	art, err := asl.Get(r.Context(), s.store, ref, maxShowArtifact)
	if err != nil {
		return err
	}
	out, err := report.ShowJSON(r.Context(), s.store, ref, art, s.ops)
	var ue *report.UndecodableError
	switch {
	case errors.Is(err, report.ErrNotPEL), errors.As(err, &ue):
		return &httpError{http.StatusUnprocessableEntity, httpstore.CodeBadRequest, err.Error()}
	case err != nil:
		return err
	}
	return writeJSONBytes(w, out)
}

func (s *Server) provWhy(w http.ResponseWriter, r *http.Request) error {
	return s.prov(w, r, tgk.Why)
}

func (s *Server) provUses(w http.ResponseWriter, r *http.Request) error {
	return s.prov(w, r, tgk.Uses)
}

// prov is GET /v1/prov/why|uses/REF?depth=N: the `prov why|uses --json`
// object.
func (s *Server) prov(w http.ResponseWriter, r *http.Request, walk func(context.Context, asl.Store, asl.Reference, int) (*tgk.Graph, error)) error {
	ref, err := parseRefParam(r)
	if err != nil {
		return err
	}
	depth := 0
	if t := r.URL.Query().Get("depth"); t != "" {
		if depth, err = strconv.Atoi(t); err != nil || depth < 0 {
			return badRequest("depth %q: want an integer of 0 (no bound) or more", t)
		}
	}
	g, err := walk(r.Context(), s.store, ref, depth)
	if err != nil {
		return fmt.Errorf("%s: %w", ref, err)
	}
	return writeJSON(w, report.NewGraph(g))
}
