package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/closure"
)

// The maintenance routes (SPECS.md §18.10, scope admin): pins, their
// history, rm and gc, run by the server on its own store while it keeps
// serving. Each calls the Go API the command line calls on a directory
// (asl.Pinner, asl.PinLogger, closure.Protected with asl.Deleter,
// closure.Collect), so the answers are the objects the commands print.
//
// Invariants: pin changes, deletions, collections and evictions
// (evict.go) hold s.maint for writing, so a deletion judged safe against
// the pins (Protected, the eviction's mark) is never overtaken by a pin
// added in between. Runs hold it for reading: a run reads its inputs
// before it stores the result that reaches them, and a collection that
// started in between would find them unreachable. Puts and reads do not
// take it: the store's own gc gates (pebblestore.GC) keep what they put or
// read while a collection runs.

// anonymousActor is the actor recorded for changes made without a token
// file (every request has every scope then).
const anonymousActor = "anonymous"

// actorContext carries the caller's token name as the actor of the changes
// a request makes (asl.WithActor, recorded in the pin history).
func actorContext(ctx context.Context, token string, authed bool) context.Context {
	if !authed {
		token = anonymousActor
	}
	return asl.WithActor(ctx, token)
}

func unsupported(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), asl.ErrUnsupported)
}

func (s *Server) pinner() (asl.Pinner, error) {
	p, ok := s.store.(asl.Pinner)
	if !ok {
		return nil, unsupported("this server's store keeps no pins")
	}
	return p, nil
}

// listPins is GET /v1/pins.
func (s *Server) listPins(w http.ResponseWriter, r *http.Request) error {
	p, err := s.pinner()
	if err != nil {
		return err
	}
	pins, err := p.Pins(r.Context())
	if err != nil {
		return fmt.Errorf("pins: %w", err)
	}
	out := httpstore.PinsResponse{Pins: make([]httpstore.PinJSON, len(pins))}
	for i, pn := range pins {
		out.Pins[i] = httpstore.PinJSON{Name: pn.Name, Ref: pn.Ref}
	}
	return writeJSON(w, out)
}

// addPin is POST /v1/pins.
func (s *Server) addPin(w http.ResponseWriter, r *http.Request) error {
	p, err := s.pinner()
	if err != nil {
		return err
	}
	var req httpstore.PinRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := pebblestore.CheckPinName(req.Name); err != nil {
		return badRequest("name: %v", err)
	}
	if req.Ref.IsZero() {
		return &httpError{http.StatusBadRequest, httpstore.CodeBadReference, "ref: missing or null"}
	}
	s.maint.Lock()
	err = p.Pin(r.Context(), req.Name, req.Ref, asl.PinOptions{Force: req.Force})
	s.maint.Unlock()
	if errors.Is(err, asl.ErrPinExists) {
		return &httpError{http.StatusConflict, httpstore.CodePinExists, oneLine(err.Error())}
	}
	if err != nil {
		return err
	}
	return writeJSON(w, httpstore.PinJSON{Name: req.Name, Ref: req.Ref})
}

// removePins is POST /v1/pins/remove.
func (s *Server) removePins(w http.ResponseWriter, r *http.Request) error {
	p, err := s.pinner()
	if err != nil {
		return err
	}
	var req httpstore.UnpinRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if len(req.Names) > s.limits.MaxBatchCount {
		return &httpError{http.StatusRequestEntityTooLarge, httpstore.CodeTooLarge, fmt.Sprintf("names: %d, above max_batch_count %d", len(req.Names), s.limits.MaxBatchCount)}
	}
	out := httpstore.UnpinResponse{Removed: []string{}, Missing: []string{}}
	s.maint.Lock()
	defer s.maint.Unlock()
	for _, name := range req.Names {
		ok, err := p.Unpin(r.Context(), name)
		if err != nil {
			return fmt.Errorf("unpin %s: %w", name, err)
		}
		if ok {
			out.Removed = append(out.Removed, name)
		} else {
			out.Missing = append(out.Missing, name)
		}
	}
	return writeJSON(w, out)
}

// pinLog is GET /v1/pins/log[?name=NAME].
func (s *Server) pinLog(w http.ResponseWriter, r *http.Request) error {
	pl, ok := s.store.(asl.PinLogger)
	if !ok {
		return unsupported("this server's store keeps no pin history")
	}
	name := r.URL.Query().Get("name")
	if name != "" {
		if err := pebblestore.CheckPinName(name); err != nil {
			return badRequest("name: %v", err)
		}
	}
	changes, err := pl.PinLog(r.Context(), name)
	if err != nil {
		return fmt.Errorf("pin log: %w", err)
	}
	out := httpstore.PinLogResponse{Changes: make([]httpstore.PinChangeJSON, len(changes))}
	for i, c := range changes {
		out.Changes[i] = httpstore.NewPinChangeJSON(c)
	}
	return writeJSON(w, out)
}

// deleteArtifacts is POST /v1/artifacts/delete: `amduat rm` on the
// server's store.
func (s *Server) deleteArtifacts(w http.ResponseWriter, r *http.Request) error {
	d, ok := s.store.(asl.Deleter)
	if !ok {
		return unsupported("this server's store cannot delete")
	}
	var req httpstore.DeleteRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if len(req.Refs) > s.limits.MaxBatchCount {
		return &httpError{http.StatusRequestEntityTooLarge, httpstore.CodeTooLarge, fmt.Sprintf("refs: %d, above max_batch_count %d", len(req.Refs), s.limits.MaxBatchCount)}
	}
	for i, ref := range req.Refs {
		if ref.IsZero() {
			return &httpError{http.StatusBadRequest, httpstore.CodeBadReference, fmt.Sprintf("refs[%d]: null is not a reference", i)}
		}
	}
	longRequest(w)
	s.maint.Lock()
	defer s.maint.Unlock()
	items, err := Remove(r.Context(), s.store, d, req.Refs, req.Force)
	if err != nil {
		return err
	}
	for _, it := range items {
		if it.Deleted {
			s.evict.forget(it.Ref)
		}
	}
	return writeJSON(w, httpstore.DeleteResponse{Refs: items})
}

// Remove deletes refs from st the way `amduat rm` does (SPECS.md §16.3):
// a reference a pin names or reaches (closure.Protected) is refused, and
// then nothing is deleted, unless force; the items say, per reference,
// "deleted", "missing", "refused" (with the reason) or "kept". The
// caller keeps pins from changing meanwhile.
func Remove(ctx context.Context, st closure.Store, d asl.Deleter, refs []asl.Reference, force bool) ([]httpstore.DeleteItem, error) {
	var roots []closure.Root
	if p, ok := st.(asl.Pinner); ok {
		pins, err := p.Pins(ctx)
		if err != nil {
			return nil, fmt.Errorf("pins: %w", err)
		}
		for _, pn := range pins {
			roots = append(roots, closure.Root{Name: pn.Name, Ref: pn.Ref})
		}
	}
	why, err := closure.Protected(ctx, st, roots, refs)
	if err != nil {
		return nil, err
	}
	items := make([]httpstore.DeleteItem, len(refs))
	refused := 0
	for i, ref := range refs {
		items[i].Ref = ref
		if reason, ok := why[ref]; ok {
			if force {
				items[i].Forced = reason
			} else {
				items[i].State, items[i].Reason = "refused", reason
				refused++
			}
		}
	}
	if refused > 0 {
		for i := range items {
			if items[i].State == "" {
				items[i].State = "kept"
			}
		}
		return items, nil
	}
	del, err := d.Delete(ctx, refs)
	if err != nil {
		return nil, err
	}
	done := map[asl.Reference]bool{}
	for i, ok := range del {
		if ok {
			done[refs[i]] = true
		}
	}
	for i := range items {
		if done[items[i].Ref] {
			items[i].State, items[i].Deleted = "deleted", true
		} else {
			items[i].State = "missing"
		}
	}
	return items, nil
}

// Collector is a store that runs the project's garbage collection
// (closure.Collect on the embedded store).
type Collector interface {
	Collect(ctx context.Context, opts closure.GCOptions) (pebblestore.GCReport, error)
}

// collector returns the garbage collection of the server's store.
func (s *Server) collector() (Collector, error) {
	switch st := s.store.(type) {
	case Collector:
		return st, nil
	case *pebblestore.Store:
		return embeddedGC{st}, nil
	}
	return nil, unsupported("this server's store has no garbage collection")
}

type embeddedGC struct{ s *pebblestore.Store }

func (g embeddedGC) Collect(ctx context.Context, opts closure.GCOptions) (pebblestore.GCReport, error) {
	return closure.Collect(ctx, g.s, opts)
}

// gc is POST /v1/gc.
func (s *Server) gc(w http.ResponseWriter, r *http.Request) error {
	col, err := s.collector()
	if err != nil {
		return err
	}
	var req httpstore.GCRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.KeepRuns < 0 || req.KeepWithinNanos < 0 {
		return badRequest("keep_runs and keep_within_ns must not be negative")
	}
	longRequest(w)
	s.maint.Lock()
	defer s.maint.Unlock()
	rep, err := col.Collect(r.Context(), closure.GCOptions{
		DryRun: req.DryRun, KeepWithin: time.Duration(req.KeepWithinNanos), KeepRuns: req.KeepRuns, CompactBelow: req.CompactBelow,
	})
	if err != nil {
		return err
	}
	return writeJSON(w, httpstore.GCReport(rep))
}

// longRequest lifts the idle read deadline the body read left on the
// connection once the body is read: net/http's watch for a client that
// goes away would take its expiry for a disconnect and cancel a
// collection that takes longer than the idle timeout. A client that does
// go away still cancels it (safely: gc is crash-safe, §6.4).
func longRequest(w http.ResponseWriter) {
	http.NewResponseController(w).SetReadDeadline(time.Time{})
}
