package plan

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/plan/effect"
	"github.com/amduat/amduat/tgk"
)

// Store is what the plan layer needs of a store: artifacts, and pins, which
// are compare-and-swap on every backend (a pin created without Force fails
// with asl.ErrPinExists when the name already names another reference) and
// durable with the guarantee of artifacts (SPECS.md §19.8).
type Store interface {
	asl.Store
	asl.Pinner
}

// PrefixPinner is an optional capability of a Store: the pins whose names
// begin with prefix, in ascending name order, at a cost proportional to
// what it returns. Without it the ledger lists every pin (Pins) and keeps
// those with the prefix.
type PrefixPinner interface {
	PinsWithPrefix(ctx context.Context, prefix string) ([]asl.Pin, error)
}

// The pin names of the ledger (SPECS.md §24.3):
//
//	plan/EXEC/NNNNNNNNNNNN      event N (12 decimal digits) of execution EXEC
//	plan/claim/KIND/KEYHASH     the claim of (kind, key), naming a step_started event
//	plan/done/KIND/KEYHASH      the successful receipt of (kind, key)
//
// EXEC is the execution id's ReferenceBytes in lowercase hex; KEYHASH the
// lowercase hex SHA-256 of the key (keys may be longer than a pin name).
// Steps whose cache policy is none claim per execution: their names end
// with "/EXEC".
const (
	pinRoot     = "plan/"
	pinClaims   = "plan/claim/"
	pinDone     = "plan/done/"
	seqDigits   = 12
	maxEventSeq = 999999999999
)

// ExecPinPrefix is the prefix of the event pins of execution id.
func ExecPinPrefix(id asl.Reference) string { return pinRoot + id.String() + "/" }

// EventPinName is the pin of event seq of execution id.
func EventPinName(id asl.Reference, seq uint64) string {
	return fmt.Sprintf("%s%0*d", ExecPinPrefix(id), seqDigits, seq)
}

func keyHash(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}

// pinKind is the effect kind as claim and done pins name it: the kind
// itself when at most 64 bytes, else "~" and the first 32 hex digits of
// its SHA-256, so that every such pin name stays within 255 bytes.
func pinKind(kind string) string {
	if len(kind) <= 64 {
		return kind
	}
	return "~" + keyHash(kind)[:32]
}

// ClaimPinName is the claim pin of (kind, key); scope is the execution id
// for steps that claim per execution, zero for global claims.
func ClaimPinName(kind, key string, scope asl.Reference) string {
	n := pinClaims + pinKind(kind) + "/" + keyHash(key)
	if !scope.IsZero() {
		n += "/" + scope.String()
	}
	return n
}

// DonePinName is the pin of the successful receipt of (kind, key), scoped
// as ClaimPinName.
func DonePinName(kind, key string, scope asl.Reference) string {
	n := pinDone + pinKind(kind) + "/" + keyHash(key)
	if !scope.IsZero() {
		n += "/" + scope.String()
	}
	return n
}

// ErrConflict is returned by Append when another writer appended an event
// with the same sequence number first: the caller folds again and decides
// on what it finds.
var ErrConflict = errors.New("ledger: another writer appended first")

// Ledger reads and appends the events of executions, stored as artifacts
// and ordered by pins.
type Ledger struct {
	st   Store
	hash asl.HashID
	// observe, when set, is told every event this Ledger appended.
	observe func(Event)
}

// Observe makes f be called with every event this Ledger appends, after
// its pin was created (a server's metrics); set it before the first
// append. f must not block.
func (l *Ledger) Observe(f func(Event)) { l.observe = f }

// StepStateAfter returns the state a step event leads its step to
// (SPECS.md §24.2), and false for the plan-level events (submitted,
// partial, completed, cancelled, resumed), which name no step.
func StepStateAfter(ev Event) (StepState, bool) {
	for _, t := range Transitions {
		if t.By != ev.Type || ev.Step == "" {
			continue
		}
		if ev.Type == EventStepSkipped {
			code, _, _ := strings.Cut(ev.Reason, " ")
			if code == ReasonDryRun || code == ReasonDraftOnly {
				return StateBlocked, true
			}
			return StateSkipped, true
		}
		if ev.Type == EventRetryRequested || ev.Type == EventCancelled {
			// Several targets; a retried step becomes ready.
			return StateReady, ev.Type == EventRetryRequested
		}
		return t.To, true
	}
	return 0, false
}

// NewLedger returns the ledger kept in st; records are hashed with hash.
func NewLedger(st Store, hash asl.HashID) *Ledger {
	if hash == 0 {
		hash = asl.HashSHA256
	}
	return &Ledger{st: st, hash: hash}
}

// pinsWithPrefix lists the pins with prefix. Without PrefixPinner it reads
// every pin of the store: one index scan on the embedded store, one
// listing and a GET per pin on a bucket.
func (l *Ledger) pinsWithPrefix(ctx context.Context, prefix string) ([]asl.Pin, error) {
	if pp, ok := l.st.(PrefixPinner); ok {
		return pp.PinsWithPrefix(ctx, prefix)
	}
	all, err := l.st.Pins(ctx)
	if err != nil {
		return nil, err
	}
	i := sort.Search(len(all), func(i int) bool { return all[i].Name >= prefix })
	j := i
	for j < len(all) && strings.HasPrefix(all[j].Name, prefix) {
		j++
	}
	return all[i:j], nil
}

// pin returns the reference pin name names, or the zero Reference.
func (l *Ledger) pin(ctx context.Context, name string) (asl.Reference, error) {
	ps, err := l.pinsWithPrefix(ctx, name)
	if err != nil {
		return asl.Reference{}, err
	}
	for _, p := range ps {
		if p.Name == name {
			return p.Ref, nil
		}
	}
	return asl.Reference{}, nil
}

// put stores a record.
func (l *Ledger) put(ctx context.Context, a asl.Artifact) (asl.Reference, error) {
	return asl.PutArtifact(ctx, l.st, l.hash, a)
}

func (l *Ledger) get(ctx context.Context, ref asl.Reference) (asl.Artifact, error) {
	return asl.Get(ctx, l.st, ref, 1<<24)
}

// Event reads the event stored under ref.
func (l *Ledger) Event(ctx context.Context, ref asl.Reference) (Event, error) {
	a, err := l.get(ctx, ref)
	if err != nil {
		return Event{}, fmt.Errorf("event %s: %w", ref, err)
	}
	ev, err := DecodeEventArtifact(a)
	if err != nil {
		return Event{}, fmt.Errorf("event %s: %w", ref, err)
	}
	return ev, nil
}

// Receipt reads the receipt stored under ref.
func (l *Ledger) Receipt(ctx context.Context, ref asl.Reference) (Receipt, error) {
	a, err := l.get(ctx, ref)
	if err != nil {
		return Receipt{}, fmt.Errorf("receipt %s: %w", ref, err)
	}
	r, err := DecodeReceiptArtifact(a)
	if err != nil {
		return Receipt{}, fmt.Errorf("receipt %s: %w", ref, err)
	}
	return r, nil
}

// PutReceipt stores a receipt of the request r.Request, whose inputs are
// ins, together with its PLAN_EFFECT provenance edge (SPECS.md §17.1,
// §24.7): from the request and the inputs to the receipt and the outputs
// it names, indexed when the store keeps an index, so that `prov why` of
// an effect's output reaches the call that produced it.
func (l *Ledger) PutReceipt(ctx context.Context, r Receipt, ins []effect.Input) (asl.Reference, error) {
	a, err := r.Artifact()
	if err != nil {
		return asl.Reference{}, fmt.Errorf("receipt of step %q: %w", r.Step, err)
	}
	ref, err := asl.Derive(l.hash, a)
	if err != nil {
		return asl.Reference{}, fmt.Errorf("receipt of step %q: %w", r.Step, err)
	}
	e := tgk.Edge{Type: tgk.EdgeTypePlanEffect,
		From: []tgk.Endpoint{{Role: tgk.RoleRequest, Ref: r.Request}},
		To:   []tgk.Endpoint{{Role: tgk.RoleReceipt, Ref: ref}}}
	for _, in := range ins {
		e.From = append(e.From, tgk.Endpoint{Role: tgk.RoleInput, Ref: in.Ref})
	}
	for _, out := range r.Outputs {
		e.To = append(e.To, tgk.Endpoint{Role: tgk.RoleOutput, Ref: out.Ref})
	}
	ea, err := e.Artifact()
	if err != nil {
		return asl.Reference{}, fmt.Errorf("receipt of step %q: provenance edge: %w", r.Step, err)
	}
	edgeRef, err := asl.Derive(l.hash, ea)
	if err != nil {
		return asl.Reference{}, fmt.Errorf("receipt of step %q: provenance edge: %w", r.Step, err)
	}
	arts := []asl.Artifact{a, ea}
	var refs []asl.Reference
	if ix, ok := l.st.(asl.Indexer); ok {
		refs, err = ix.PutIndexed(ctx, l.hash, arts, tgk.IndexEntries(e, edgeRef))
	} else {
		refs, err = l.st.PutBatch(ctx, l.hash, arts)
	}
	if err != nil {
		return asl.Reference{}, fmt.Errorf("receipt of step %q: %w", r.Step, err)
	}
	if len(refs) != 2 || refs[0] != ref || refs[1] != edgeRef {
		return asl.Reference{}, fmt.Errorf("receipt of step %q: store returned %v for %s and %s: %w", r.Step, refs, ref, edgeRef, asl.ErrIntegrity)
	}
	return ref, nil
}

// Events reads the ledger of execution id in sequence order, with the
// reference of each event. The pins must number 1..N without a gap.
func (l *Ledger) Events(ctx context.Context, id asl.Reference) ([]Event, []asl.Reference, error) {
	prefix := ExecPinPrefix(id)
	pins, err := l.pinsWithPrefix(ctx, prefix)
	if err != nil {
		return nil, nil, fmt.Errorf("ledger %s: %w", id, err)
	}
	evs := make([]Event, 0, len(pins))
	refs := make([]asl.Reference, 0, len(pins))
	for i, p := range pins {
		seq, err := strconv.ParseUint(strings.TrimPrefix(p.Name, prefix), 10, 64)
		if err != nil || len(p.Name)-len(prefix) != seqDigits || seq != uint64(i+1) {
			return nil, nil, fmt.Errorf("ledger %s: pin %q out of sequence (want event %d): %w", id, p.Name, i+1, ErrBadLedger)
		}
		ev, err := l.Event(ctx, p.Ref)
		if err != nil {
			return nil, nil, fmt.Errorf("ledger %s: %w", id, err)
		}
		evs = append(evs, ev)
		refs = append(refs, p.Ref)
	}
	return evs, refs, nil
}

// Append stores ev and makes it event ev.Seq of its execution by creating
// its pin without Force: when another writer created that pin first it
// returns ErrConflict (unless the other event is this one, byte for byte).
func (l *Ledger) Append(ctx context.Context, ev Event) (asl.Reference, error) {
	if ev.Seq == 0 || ev.Seq > maxEventSeq {
		return asl.Reference{}, fmt.Errorf("append: seq %d out of range", ev.Seq)
	}
	ref, err := l.putEvent(ctx, ev)
	if err != nil {
		return asl.Reference{}, err
	}
	if err := l.pinEvent(ctx, ev, ref); err != nil {
		return asl.Reference{}, err
	}
	return ref, nil
}

func (l *Ledger) putEvent(ctx context.Context, ev Event) (asl.Reference, error) {
	a, err := ev.Artifact()
	if err != nil {
		return asl.Reference{}, fmt.Errorf("event %d (%s): %w", ev.Seq, ev.Type, err)
	}
	return l.put(ctx, a)
}

func (l *Ledger) pinEvent(ctx context.Context, ev Event, ref asl.Reference) error {
	name := EventPinName(ev.Execution, ev.Seq)
	err := l.st.Pin(ctx, name, ref, asl.PinOptions{})
	if errors.Is(err, asl.ErrPinExists) {
		return fmt.Errorf("event %d of %s: %w", ev.Seq, ev.Execution, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("event %d of %s: %w", ev.Seq, ev.Execution, err)
	}
	if l.observe != nil {
		l.observe(ev)
	}
	return nil
}

// Executions lists the ids of every execution in the store, in ascending
// order of their ids.
func (l *Ledger) Executions(ctx context.Context) ([]asl.Reference, error) {
	pins, err := l.pinsWithPrefix(ctx, pinRoot)
	if err != nil {
		return nil, err
	}
	var ids []asl.Reference
	first := fmt.Sprintf("/%0*d", seqDigits, 1)
	for _, p := range pins {
		rest := strings.TrimPrefix(p.Name, pinRoot)
		hexID, ok := strings.CutSuffix(rest, first)
		if !ok || strings.Contains(hexID, "/") {
			continue
		}
		id, err := asl.ParseReference(hexID)
		if err != nil {
			continue
		}
		ids = append(ids, id)
	}
	return ids, nil
}
