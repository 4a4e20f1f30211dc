package httpstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/amduat/amduat/asl"
)

// The maintenance routes of HTTP API v1 (SPECS.md §18.10, scope admin):
// pins, their history, deletion and garbage collection, run by the server
// on its own store while it keeps serving. The client implements
// asl.Pinner, asl.PinLogger and asl.Deleter over them, plus Remove (the
// protected deletion of `amduat rm`) and GC.
const (
	PathPins       = "/v1/pins"             // GET: list; POST: add (PinRequest)
	PathPinLog     = "/v1/pins/log"         // GET [?name=NAME]: history
	PathPinsRemove = "/v1/pins/remove"      // POST: UnpinRequest
	PathDelete     = "/v1/artifacts/delete" // POST: DeleteRequest
	PathGC         = "/v1/gc"               // POST: GCRequest
	CodePinExists  = "pin_exists"           // 409: the name names another reference
)

// PinRequest is the body of POST /v1/pins: name ref, re-pointing an
// existing name only with Force. Answer: PinJSON.
type PinRequest struct {
	Name  string        `json:"name"`
	Ref   asl.Reference `json:"ref"`
	Force bool          `json:"force,omitempty"`
}

// PinJSON is one pin, as `amduat pin add --json` prints it.
type PinJSON struct {
	Name string        `json:"name"`
	Ref  asl.Reference `json:"ref"`
}

// PinsResponse answers GET /v1/pins: every pin in ascending name order.
type PinsResponse struct {
	Pins []PinJSON `json:"pins"`
}

// PinChangeJSON is one entry of a pin's history on the wire: old and new
// are null for absent (the zero asl.Reference).
type PinChangeJSON struct {
	Seq      uint64         `json:"seq"`
	Name     string         `json:"name"`
	Old      *asl.Reference `json:"old"`
	New      *asl.Reference `json:"new"`
	UnixNano int64          `json:"time_unix_nano"`
	Actor    string         `json:"actor,omitempty"`
}

// PinLogResponse answers GET /v1/pins/log.
type PinLogResponse struct {
	Changes []PinChangeJSON `json:"changes"`
}

func optRef(r asl.Reference) *asl.Reference {
	if r.IsZero() {
		return nil
	}
	return &r
}

func derefRef(r *asl.Reference) asl.Reference {
	if r == nil {
		return asl.Reference{}
	}
	return *r
}

// NewPinChangeJSON renders c.
func NewPinChangeJSON(c asl.PinChange) PinChangeJSON {
	return PinChangeJSON{Seq: c.Seq, Name: c.Name, Old: optRef(c.Old), New: optRef(c.New), UnixNano: c.UnixNano, Actor: c.Actor}
}

// PinChange converts j back.
func (j PinChangeJSON) PinChange() asl.PinChange {
	return asl.PinChange{Seq: j.Seq, Name: j.Name, Old: derefRef(j.Old), New: derefRef(j.New), UnixNano: j.UnixNano, Actor: j.Actor}
}

// UnpinRequest is the body of POST /v1/pins/remove.
type UnpinRequest struct {
	Names []string `json:"names"`
}

// UnpinResponse answers it: the names removed and the names that were no
// pin, each in request order (the object `amduat pin rm --json` prints).
type UnpinResponse struct {
	Removed []string `json:"removed"`
	Missing []string `json:"missing"`
}

// DeleteRequest is the body of POST /v1/artifacts/delete: delete refs,
// refusing (and deleting nothing) when one is pinned or reachable from a
// pin, unless Force.
type DeleteRequest struct {
	Refs  []asl.Reference `json:"refs"`
	Force bool            `json:"force,omitempty"`
}

// DeleteItem is the outcome for one reference, as `amduat rm --json`
// prints it. State is "deleted", "missing" (not stored), "refused" (Reason
// says why) or "kept" (another reference was refused); Forced is the
// reason a forced deletion overrode.
type DeleteItem struct {
	Ref     asl.Reference `json:"ref"`
	State   string        `json:"state"`
	Reason  string        `json:"reason,omitempty"`
	Forced  string        `json:"forced,omitempty"`
	Deleted bool          `json:"deleted"`
}

// DeleteResponse answers POST /v1/artifacts/delete, in request order.
type DeleteResponse struct {
	Refs []DeleteItem `json:"refs"`
}

// GCRequest is the body of POST /v1/gc: the options of `amduat gc`.
type GCRequest struct {
	DryRun bool `json:"dry_run,omitempty"`
	// KeepWithinNanos keeps what the runs logged within this many
	// nanoseconds reach; KeepRuns what the newest N runs reach.
	KeepWithinNanos int64   `json:"keep_within_ns,omitempty"`
	KeepRuns        int     `json:"keep_runs,omitempty"`
	CompactBelow    float64 `json:"compact_below,omitempty"`
}

// GCReport answers POST /v1/gc: the report `amduat gc --json` prints (the
// same fields as pebblestore.GCReport, which this package does not
// import).
type GCReport struct {
	DryRun         bool           `json:"dry_run"`
	Roots          int            `json:"roots"`
	Stored         int64          `json:"stored"`
	Reached        int64          `json:"reached"`
	Deleted        int64          `json:"deleted"`
	DeletedBytes   int64          `json:"deleted_bytes"`
	KeptConcurrent int64          `json:"kept_concurrent"`
	Entries        map[string]int `json:"entries_deleted"`
	PacksCompacted int            `json:"packs_compacted"`
	PacksDeleted   int            `json:"packs_deleted"`
	Rewritten      int64          `json:"rewritten"`
	RewrittenBytes int64          `json:"rewritten_bytes"`
	PackBytes      [2]int64       `json:"pack_bytes"`
	Duration       time.Duration  `json:"duration_ns"`
}

var (
	_ asl.Pinner    = (*Client)(nil)
	_ asl.PinLogger = (*Client)(nil)
	_ asl.Deleter   = (*Client)(nil)
)

// Pin implements asl.Pinner over POST /v1/pins. A 409 pin_exists wraps
// asl.ErrPinExists; 404 ERR_NOT_FOUND (ref not stored) asl.ErrNotFound.
// Re-pinning is idempotent, so the request is retried.
func (c *Client) Pin(ctx context.Context, name string, ref asl.Reference, opts asl.PinOptions) error {
	if err := checkRef(ref); err != nil {
		return fmt.Errorf("pin %s: %w", name, err)
	}
	var out PinJSON
	err := c.DoJSON(ctx, http.MethodPost, PathPins, true, PinRequest{Name: name, Ref: ref, Force: opts.Force}, &out)
	if err != nil {
		return pinErr(err)
	}
	if out.Name != name || out.Ref != ref {
		return fmt.Errorf("POST %s: answer names pin %q %s, not %q %s: %w", c.redact(PathPins, nil), out.Name, out.Ref, name, ref, ErrProtocol)
	}
	return nil
}

// pinErr adds asl.ErrPinExists to a 409 pin_exists.
func pinErr(err error) error {
	var he *Error
	if errors.As(err, &he) && he.Code == CodePinExists {
		return fmt.Errorf("%w: %w", asl.ErrPinExists, err)
	}
	return err
}

// Unpin implements asl.Pinner over POST /v1/pins/remove.
func (c *Client) Unpin(ctx context.Context, name string) (bool, error) {
	out, err := c.Unpins(ctx, []string{name})
	if err != nil {
		return false, err
	}
	return len(out.Removed) == 1, nil
}

// Unpins removes several pins in one request (POST /v1/pins/remove). It
// is not retried: a retry after a lost answer would report the removed
// names missing.
func (c *Client) Unpins(ctx context.Context, names []string) (UnpinResponse, error) {
	var out UnpinResponse
	if err := c.DoJSON(ctx, http.MethodPost, PathPinsRemove, false, UnpinRequest{Names: names}, &out); err != nil {
		return out, err
	}
	if len(out.Removed)+len(out.Missing) != len(names) {
		return out, fmt.Errorf("POST %s: answer accounts for %d of %d names: %w", c.redact(PathPinsRemove, nil), len(out.Removed)+len(out.Missing), len(names), ErrProtocol)
	}
	return out, nil
}

// Pins implements asl.Pinner over GET /v1/pins.
func (c *Client) Pins(ctx context.Context) ([]asl.Pin, error) {
	var out PinsResponse
	if err := c.DoJSON(ctx, http.MethodGet, PathPins, true, nil, &out); err != nil {
		return nil, err
	}
	pins := make([]asl.Pin, len(out.Pins))
	for i, p := range out.Pins {
		if i > 0 && p.Name <= out.Pins[i-1].Name {
			return nil, fmt.Errorf("GET %s: pins not in ascending name order at %q: %w", c.redact(PathPins, nil), p.Name, ErrProtocol)
		}
		pins[i] = asl.Pin{Name: p.Name, Ref: p.Ref}
	}
	if len(pins) == 0 {
		return nil, nil
	}
	return pins, nil
}

// PinLog implements asl.PinLogger over GET /v1/pins/log. A server whose
// store keeps no history answers 501 ERR_UNSUPPORTED (asl.ErrUnsupported).
func (c *Client) PinLog(ctx context.Context, name string) ([]asl.PinChange, error) {
	path := PathPinLog
	if name != "" {
		path += "?" + url.Values{"name": {name}}.Encode()
	}
	var out PinLogResponse
	if err := c.DoJSON(ctx, http.MethodGet, path, true, nil, &out); err != nil {
		return nil, err
	}
	ch := make([]asl.PinChange, len(out.Changes))
	for i, j := range out.Changes {
		ch[i] = j.PinChange()
	}
	if len(ch) == 0 {
		return nil, nil
	}
	return ch, nil
}

// Delete implements asl.Deleter over POST /v1/artifacts/delete with force:
// as the interface says, it does not check what refers to refs (Remove
// does, on the server).
func (c *Client) Delete(ctx context.Context, refs []asl.Reference) ([]bool, error) {
	items, err := c.Remove(ctx, refs, true)
	if err != nil {
		return nil, err
	}
	del := make([]bool, len(items))
	for i, it := range items {
		del[i] = it.Deleted
	}
	return del, nil
}

// Remove is `amduat rm` on the server (POST /v1/artifacts/delete): it
// refuses, deleting nothing, when one of refs is pinned or reachable from a
// pin (closure.Protected on the server's store), unless force. Deleting is
// idempotent except for the report (a retried request reports "missing"
// what the lost answer deleted), so it is not retried.
func (c *Client) Remove(ctx context.Context, refs []asl.Reference, force bool) ([]DeleteItem, error) {
	for _, r := range refs {
		if err := checkRef(r); err != nil {
			return nil, fmt.Errorf("delete: %w", err)
		}
	}
	var out DeleteResponse
	if err := c.DoJSON(ctx, http.MethodPost, PathDelete, false, DeleteRequest{Refs: refs, Force: force}, &out); err != nil {
		return nil, err
	}
	if len(out.Refs) != len(refs) {
		return nil, fmt.Errorf("POST %s: %d answers for %d references: %w", c.redact(PathDelete, nil), len(out.Refs), len(refs), ErrProtocol)
	}
	for i, it := range out.Refs {
		if it.Ref != refs[i] {
			return nil, fmt.Errorf("POST %s: answer %d names %s, not %s: %w", c.redact(PathDelete, nil), i, it.Ref, refs[i], ErrProtocol)
		}
	}
	return out.Refs, nil
}

// GC runs the server's garbage collection on its store (POST /v1/gc) and
// returns its report. The server keeps serving meanwhile; what is put or
// read while it runs is kept. A dry run is retried, a real one is not.
func (c *Client) GC(ctx context.Context, req GCRequest) (GCReport, error) {
	var rep GCReport
	err := c.DoJSON(ctx, http.MethodPost, PathGC, req.DryRun, req, &rep)
	if rep.Entries == nil {
		rep.Entries = map[string]int{}
	}
	return rep, err
}
