package plan

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/plan/effect"
)

// foldPlan: a (effect, no dependency) and b (effect, depends on a).
func foldPlan() *Plan {
	st := func(id string, deps ...string) Step {
		return Step{ID: id, DependsOn: deps, Kind: EffectStep, Effect: "svc", EffectParams: []byte(`{}`), Class: effect.ReadOnly,
			Gate: GateNone, Cache: CacheNone, Retry: RetryPolicy{MaxAttempts: 3, BaseMillis: 10, CapMillis: 100}}
	}
	return &Plan{Steps: []Step{st("a"), st("b", "a")}}
}

var foldID = asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("execution")))

// chain gives each event its execution, seq and parent, and returns the
// events with their references.
func chain(t testing.TB, evs []Event) ([]Event, []asl.Reference) {
	refs := make([]asl.Reference, len(evs))
	var parent asl.Reference
	for i := range evs {
		if evs[i].Execution.IsZero() {
			evs[i].Execution = foldID
		}
		if evs[i].Seq == 0 {
			evs[i].Seq = uint64(i + 1)
		}
		if i > 0 && evs[i].Parent.IsZero() {
			evs[i].Parent = parent
		}
		a, err := evs[i].Artifact()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		refs[i] = asl.MustDerive(asl.HashSHA256, a)
		parent = refs[i]
	}
	return evs, refs
}

// TestFoldRejects: a ledger that breaks a rule of SPECS.md §24.4 does not
// fold, and the error names what broke.
func TestFoldRejects(t *testing.T) {
	t.Parallel()
	sub := Event{Type: EventSubmitted}
	ready := func(s string) Event { return Event{Type: EventStepReady, Step: s} }
	started := func(s string, n uint32) Event { return Event{Type: EventStepStarted, Step: s, Attempt: n} }
	ok := func(s string) Event { return Event{Type: EventStepSucceeded, Step: s, Attempt: 1} }
	other := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("other")))
	for _, tc := range []struct {
		name string
		evs  []Event
		want string
	}{
		{"legal", []Event{sub, ready("a"), started("a", 1), ok("a"), ready("b")}, ""},
		{"ready before dependency", []Event{sub, ready("b")}, "before its dependencies"},
		{"illegal transition", []Event{sub, ready("a"), ok("a"), started("a", 1)}, "illegal step transition succeeded -> running"},
		{"started twice as attempt 1", []Event{sub, ready("a"), started("a", 1), started("a", 1)}, "attempt 1, want 2"},
		{"unknown step", []Event{sub, ready("zz")}, `unknown step "zz"`},
		{"other execution", []Event{sub, {Type: EventStepReady, Step: "a", Execution: other}}, "names execution"},
		{"seq gap", []Event{sub, {Type: EventStepReady, Step: "a", Seq: 3}}, "seq 3, want 2"},
		{"wrong parent", []Event{sub, {Type: EventStepReady, Step: "a", Parent: other}}, "parent"},
		{"completed early", []Event{sub, ready("a"), {Type: EventCompleted}}, "completed with step"},
		{"after cancelled", []Event{sub, {Type: EventCancelled}, ready("a")}, "after the execution cancelled"},
		{"retry_scheduled without delay", []Event{sub, ready("a"), started("a", 1), {Type: EventRetryScheduled, Step: "a", Attempt: 1, ErrorClass: effect.RateLimited, Reason: "soon"}}, "RETRY_IN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, refs := chain(t, append([]Event(nil), tc.evs...))
			x, err := Fold(foldID, Submission{Mode: Auto}, foldPlan(), evs, refs)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if s, _ := x.Step("b"); s.State != StateReady {
					t.Fatalf("b %s", s.State)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrBadLedger) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want ErrBadLedger naming %q", err, tc.want)
			}
		})
	}
}

// FuzzFold: any sequence of decodable events folds or is refused with an
// error, never a panic. The input is a list of u16-length-prefixed
// EventBytes.
func FuzzFold(f *testing.F) {
	evs, _ := chain(f, []Event{{Type: EventSubmitted}, {Type: EventStepReady, Step: "a"}, {Type: EventStepStarted, Step: "a", Attempt: 1},
		{Type: EventRetryScheduled, Step: "a", Attempt: 1, ErrorClass: effect.RateLimited, Reason: "RETRY_IN 20ms rate_limited x"}})
	var seed []byte
	for _, ev := range evs {
		b, _ := ev.Encode()
		seed = binary.BigEndian.AppendUint16(seed, uint16(len(b)))
		seed = append(seed, b...)
	}
	f.Add(seed)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var evs []Event
		var refs []asl.Reference
		for len(data) >= 2 {
			n := int(binary.BigEndian.Uint16(data))
			data = data[2:]
			if n > len(data) {
				break
			}
			ev, err := DecodeEvent(data[:n])
			data = data[n:]
			if err != nil {
				continue
			}
			evs = append(evs, ev)
			a, _ := ev.Artifact()
			refs = append(refs, asl.MustDerive(asl.HashSHA256, a))
		}
		x, err := Fold(foldID, Submission{Mode: Auto}, foldPlan(), evs, refs)
		if err == nil && x.Seq != uint64(len(evs)) {
			t.Fatalf("folded %d events to seq %d", len(evs), x.Seq)
		}
	})
}

func FuzzRetryDelay(f *testing.F) {
	for _, s := range []string{"RETRY_IN 530ms rate_limited 429", "RETRY_IN ms", "RETRY_IN 99999999999ms", "", "RETRY_IN -1ms"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := retryDelay(s)
		if err == nil && (d < 0 || !strings.HasPrefix(s, ReasonRetryIn+" ")) {
			t.Fatalf("%q: %v", s, d)
		}
	})
}

// TestConcurrentRunners: four runners drive one execution at once. The
// ledger stays one chain that folds, and the external_send whose executor
// does not honour keys is called at most once; a runner that finds it
// running while another calls it may surface it as unknown_outcome (SPECS
// §24.7, "Limitation"), never call it again.
func TestConcurrentRunners(t *testing.T) {
	t.Parallel()
	for round := 0; round < 5; round++ {
		f := newFixture(t, newMemPinned(), false)
		id := f.submit(demoPlan(t, f.st, GateNone), Auto, "doc")
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for k := range errs {
			r := f.runner(f.exe)
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[k] = r.Run(context.Background(), id)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		x, err := f.r.Status(f.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		key, err := x.Key(2)
		if err != nil {
			t.Fatal(err)
		}
		if calls, _ := f.svc.count(key); calls > 1 {
			t.Fatalf("post called %d times", calls)
		}
		if s, _ := x.Step("post"); s.State != StateSucceeded && s.State != StateUnknownOutcome {
			t.Fatalf("post %s", s.State)
		}
	}
}

// TestPinNames: the ledger's pin names (SPECS.md §24.3, §24.7) for the
// longest kinds and keys stay within a pin name's 255 bytes.
func TestPinNames(t *testing.T) {
	t.Parallel()
	if got := EventPinName(foldID, 42); got != "plan/"+foldID.String()+"/000000000042" {
		t.Fatalf("event pin %q", got)
	}
	long := strings.Repeat("k", MaxIdent)
	key := strings.Repeat("x", MaxKey)
	for _, n := range []string{ClaimPinName(long, key, foldID), DonePinName(long, key, foldID), ClaimPinName("http", key, asl.Reference{})} {
		if len(n) > 255 {
			t.Errorf("%d bytes: %s", len(n), n)
		}
	}
	if got := ClaimPinName("http", "k1", asl.Reference{}); got != "plan/claim/http/"+keyHash("k1") {
		t.Fatalf("claim pin %q", got)
	}
}
