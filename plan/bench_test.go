package plan

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/plan/effect"
	"github.com/amduat/amduat/surf"
)

// BenchmarkLedgerAppend: events appended per second to one execution's
// ledger on the embedded store (an artifact put and a durable pin each).
func BenchmarkLedgerAppend(b *testing.B) {
	st := newPebble(b, b.TempDir())
	defer st.Close()
	l := NewLedger(prefixPebble{st}, 0)
	ctx := context.Background()
	head, err := l.Append(ctx, Event{Type: EventSubmitted, Execution: foldID, Seq: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ev := Event{Type: EventPartial, Execution: foldID, Seq: uint64(i + 2), Parent: head, Time: int64(i)}
		if head, err = l.Append(ctx, ev); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkResume10000: reading and folding the ledger of a 10,000-step
// plan (30,001 events: every step ready, started, succeeded), what a
// resume reads before it decides anything; in memory, so it measures the
// fold and the decoding, not the disk.
func BenchmarkResume10000(b *testing.B) {
	const n = 10000
	st := newMemPinned()
	p := &Plan{}
	for i := 0; i < n; i++ {
		p.Steps = append(p.Steps, Step{ID: fmt.Sprintf("s%05d", i), Kind: EffectStep, Effect: "svc", EffectParams: []byte(`{}`),
			Class: effect.ReadOnly, Gate: GateNone, Cache: CacheNone, Retry: RetryPolicy{MaxAttempts: 1, BaseMillis: 1, CapMillis: 1}})
	}
	pref := putPlan(b, st, p)
	r, err := NewRunner(st, Options{Clock: newTestClock()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	id, _, err := r.Submit(ctx, Submission{Plan: pref, Mode: Auto})
	if err != nil {
		b.Fatal(err)
	}
	x, err := r.Status(ctx, id)
	if err != nil {
		b.Fatal(err)
	}
	out := putBytes(b, st, "out")
	for i := 0; i < n; i++ {
		s := p.Steps[i].ID
		for _, ev := range []Event{{Type: EventStepReady, Step: s}, {Type: EventStepStarted, Step: s, Attempt: 1},
			{Type: EventStepSucceeded, Step: s, Attempt: 1, Outputs: []effect.Output{{Name: "body", Ref: out}}}} {
			ref, err := r.append(ctx, x, ev)
			if err != nil {
				b.Fatal(err)
			}
			ev.Execution, ev.Seq, ev.Parent = x.ID, x.Seq+1, x.Head
			if err := x.apply(ev, ref); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		x, err := r.Status(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		if x.Status != ExecRunning || x.Seq != 3*n+1 {
			b.Fatalf("status %s seq %d", x.Status, x.Seq)
		}
	}
}

// BenchmarkPELStepOverhead: the cost of a PEL step inside a plan against
// the same run through the surface alone (what `amduat pel run` does), on
// the embedded store, measured alternately in the same loop so both see
// the same machine. Each iteration runs seed concat on two small inputs
// once directly and once as the only step of a new execution (Submit with
// a fresh label, then Run to completion: the submission, and the
// submitted, step_ready, step_succeeded and completed events, each an
// artifact and a durable pin). The action cache is off on both sides, so
// both evaluate the program. Metrics: pel-us and plan-us per run, their
// difference overhead-us and their ratio.
func BenchmarkPELStepOverhead(b *testing.B) {
	st := newPebble(b, b.TempDir())
	defer st.Close()
	ps := prefixPebble{st}
	ctx := context.Background()
	prog := putSeed(b, st, pel.SeedConcat)
	in0, in1 := putBytes(b, st, "hello, "), putBytes(b, st, "world")
	so := surf.Options{Hash: asl.HashSHA256, NoCache: true}
	sf := surf.New(st, so)
	req := surf.Request{ProgramRef: prog, InputRefs: []asl.Reference{in0, in1}}
	pref := putPlan(b, st, &Plan{Steps: []Step{{ID: "concat", Kind: PELStep, Program: prog,
		Inputs: []Binding{{Name: "0", Ref: in0}, {Name: "1", Ref: in1}}}}})
	r, err := NewRunner(ps, Options{Surface: so})
	if err != nil {
		b.Fatal(err)
	}
	var direct, planned time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		run, err := sf.Run(ctx, req)
		if err != nil || run.Result.Value.Status != pel.StatusOK {
			b.Fatalf("pel run: %v", err)
		}
		t1 := time.Now()
		id, _, err := r.Submit(ctx, Submission{Plan: pref, Mode: Auto, Label: fmt.Sprint(i)})
		if err != nil {
			b.Fatal(err)
		}
		x, err := r.Run(ctx, id)
		if err != nil || x.Status != ExecCompleted {
			b.Fatalf("plan run: %v", err)
		}
		t2 := time.Now()
		direct += t1.Sub(t0)
		planned += t2.Sub(t1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(direct.Microseconds())/n, "pel-us")
	b.ReportMetric(float64(planned.Microseconds())/n, "plan-us")
	b.ReportMetric(float64((planned-direct).Microseconds())/n, "overhead-us")
	b.ReportMetric(float64(planned)/float64(direct), "ratio")
}
