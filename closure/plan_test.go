package closure_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/closure"
	"github.com/amduat/amduat/plan"
	"github.com/amduat/amduat/plan/effect"
)

// The head of a plan's ledger reaches every event, the submission, the
// plan with its program, params and bound inputs, every receipt with its
// request, the request's inputs and the outputs (SPECS.md §19.6, §22), in
// the breadth-first order of §19.6; a pinned head keeps them all through
// a collection.
func TestPlanReachability(t *testing.T) {
	ctx := context.Background()
	s, err := pebblestore.Create("store", &pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	put := func(a asl.Artifact, err error) asl.Reference {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		r, err := asl.PutArtifact(ctx, s, asl.HashSHA256, a)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	raw := func(s string) asl.Reference { return put(asl.Untagged([]byte(s)), nil) }
	program, params, doc := raw("program"), raw("params"), raw("doc")
	p := plan.Plan{Steps: []plan.Step{
		{ID: "count", Kind: plan.PELStep, Program: program, Params: params, HasParams: true,
			Inputs: []plan.Binding{{Name: "0", Step: "fetch", Output: "body"}}},
		{ID: "fetch", Kind: plan.EffectStep, Effect: "http", EffectParams: []byte(`{"url":"x"}`),
			Class: effect.ReadOnly, Gate: plan.GateNone, Retry: plan.RetryPolicy{MaxAttempts: 1}, Cache: plan.CacheNone,
			Inputs: []plan.Binding{{Name: "doc", Ref: doc}}},
	}}
	planRef := put(p.Artifact())
	sub := plan.Submission{Plan: planRef, Mode: plan.Gated}
	exec := put(sub.Artifact())
	req := plan.EffectRequest{Kind: "http", Params: []byte(`{"url":"x"}`), Inputs: []effect.Input{{Name: "doc", Ref: doc}}, Key: "k"}
	reqRef := put(req.Artifact())
	body := raw("body")
	rec := plan.Receipt{Kind: plan.AttemptReceipt, Plan: planRef, Execution: exec, Step: "fetch", Effect: "http", Request: reqRef,
		Key: "k", Attempt: 1, Outcome: plan.Succeeded, Outputs: []effect.Output{{Name: "body", Ref: body}}, Executor: "http"}
	recRef := put(rec.Artifact())
	e1 := put(plan.Event{Execution: exec, Seq: 1, Type: plan.EventSubmitted}.Artifact())
	e2 := put(plan.Event{Execution: exec, Seq: 2, Parent: e1, Type: plan.EventStepSucceeded, Step: "fetch",
		Receipt: recRef, Outputs: []effect.Output{{Name: "body", Ref: body}}}.Artifact())
	garbage := raw("garbage")

	var order []asl.Reference
	if err := closure.Walk(ctx, s, []asl.Reference{e2}, func(n closure.Node) error {
		if !n.Present || n.Undecodable != nil {
			t.Fatalf("%s: %+v", n.Ref, n)
		}
		order = append(order, n.Ref)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// e2 -> e1, exec, receipt, body; exec -> plan; receipt -> request;
	// plan -> program, params, doc (count's program and params, fetch's
	// input).
	want := []asl.Reference{e2, e1, exec, recRef, body, planRef, reqRef, program, params, doc}
	if !slices.Equal(order, want) {
		t.Fatalf("reached\n%v\nwant\n%v", order, want)
	}

	if err := s.Pin(ctx, "ledger", e2, asl.PinOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := closure.Collect(ctx, s, closure.GCOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, r := range want {
		if ok, err := asl.Has(ctx, s, r); err != nil || !ok {
			t.Fatalf("%s collected (%v)", r, err)
		}
	}
	if ok, err := asl.Has(ctx, s, garbage); err != nil || ok {
		t.Fatalf("garbage kept (%v)", err)
	}

	// Each tag of the plan layer whose bytes do not decode contributes
	// nothing and is reported.
	for _, tag := range []asl.TypeTag{plan.TagPlan, plan.TagEffectRequest, plan.TagReceipt, plan.TagSubmission, plan.TagEvent} {
		bad := put(asl.Tagged(tag, []byte{1, 0, 0, 0, 9}), nil)
		in, _ := s.Stat(ctx, bad)
		if _, err := closure.Children(ctx, s, in); !errors.Is(err, closure.ErrUndecodable) {
			t.Fatalf("tag %08x: %v", uint32(tag), err)
		}
	}
}
