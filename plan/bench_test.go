package plan

import (
	"context"
	"fmt"
	"testing"

	"github.com/amduat/amduat/plan/effect"
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
