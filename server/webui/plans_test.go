package webui_test

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/internal/golden"
	"github.com/amduat/amduat/plan"
	"github.com/amduat/amduat/server/webui"
)

// planCSRF is the form token the tests' PlanForm hands out.
const planCSRF = "csrf-token-of-the-test"

func newPlanHandler(f *planFixture, forms bool) http.Handler {
	opts := webui.Options{Prefix: prefix, RawURL: rawURL, Plans: f.runner}
	if forms {
		opts.PlanForm = func(http.ResponseWriter, *http.Request) string { return planCSRF }
	}
	return webui.New(f.s, opts)
}

// TestPlanGolden pins the HTML of the plans page and of an execution page
// (a step waiting for approval, with its forms) and a rejected one, byte
// for byte, and checks that a second store with the same content renders
// the same bytes (SPECS.md §18.7, "The pages").
func TestPlanGolden(t *testing.T) {
	t.Parallel()
	f := newPlanFixture(t, filepath.Join(t.TempDir(), "a"), "http://127.0.0.1:9")
	again := newPlanFixture(t, filepath.Join(t.TempDir(), "b"), "http://127.0.0.1:9")
	for _, tt := range []struct {
		file string
		path func(*planFixture) string
	}{
		{"plans.html", func(*planFixture) string { return prefix + "plans/" }},
		{"plan_waiting.html", func(f *planFixture) string { return prefix + "plans/" + f.waiting.String() }},
		{"plan_rejected.html", func(f *planFixture) string { return prefix + "plans/" + f.rejected.String() }},
	} {
		t.Run(tt.file, func(t *testing.T) {
			body := expect(t, newPlanHandler(f, true), tt.path(f), http.StatusOK)
			golden.Check(t, "testdata/"+tt.file, []byte(body))
			if second := expect(t, newPlanHandler(again, true), tt.path(again), http.StatusOK); second != body {
				t.Fatal("a store with the same content rendered different bytes")
			}
		})
	}
}

// TestPlanPages checks what the plan pages say: states, colours, reason
// codes, receipts linked to their artifact pages, forms only where a step
// waits and only with a token, and the errors of bad addresses.
func TestPlanPages(t *testing.T) {
	t.Parallel()
	f := newPlanFixture(t, t.TempDir(), "http://127.0.0.1:9")
	h := newPlanHandler(f, true)
	ctx := t.Context()
	waiting, err := f.runner.Status(ctx, f.waiting)
	if err != nil {
		t.Fatal(err)
	}
	rejected, err := f.runner.Status(ctx, f.rejected)
	if err != nil {
		t.Fatal(err)
	}
	docResult := waiting.Steps[0].Receipts[0] // steps in id order: doc, notify, send
	var rejection asl.Reference
	for _, ev := range rejected.Events {
		if ev.Type == plan.EventRejected {
			rejection = ev.Receipt
		}
	}

	t.Run("list", func(t *testing.T) {
		expect(t, h, prefix+"plans/", http.StatusOK,
			`href="`+prefix+`plans/`+f.waiting.String()+`"`,
			`href="`+prefix+`plans/`+f.rejected.String()+`"`,
			`<span class="badge st-wait">waiting</span>`,
			`<span class="badge st-failed">partial</span>`,
			"1 pending · 1 succeeded · 1 waiting_approval", "1 succeeded · 1 failed_final · 1 skipped",
			"send:REQUIRES_APPROVAL", "send:REJECTED",
		)
		expect(t, h, prefix+"plans", http.StatusSeeOther)
	})
	t.Run("waiting", func(t *testing.T) {
		body := expect(t, h, prefix+"plans/"+f.waiting.String(), http.StatusOK,
			`<g class="node step st-ok" data-node="doc">`,
			`<g class="node step st-wait" data-node="send">`,
			`<g class="node step st-pending" data-node="notify">`,
			`<span class="badge st-wait state">waiting_approval</span>`,
			`<code>REQUIRES_APPROVAL</code>`,
			`href="`+page(docResult)+`"`, // the PEL step's result
			`<input type="hidden" name="csrf" value="`+planCSRF+`">`,
			`action="`+prefix+`plans/`+f.waiting.String()+`/decide"`,
			"gate_requested",
		)
		if n := strings.Count(body, `<form class="decide`); n != 2 {
			t.Errorf("%d decision forms, want 2 (approve and reject send)", n)
		}
		if body := expect(t, newPlanHandler(f, false), prefix+"plans/"+f.waiting.String(), http.StatusOK); strings.Contains(body, `<form class="decide`) {
			t.Error("forms rendered without a CSRF token")
		}
	})
	t.Run("rejected", func(t *testing.T) {
		body := expect(t, h, prefix+"plans/"+f.rejected.String(), http.StatusOK,
			`<g class="node step st-failed" data-node="send">`,
			`<g class="node step st-skipped" data-node="notify">`,
			`<code>REJECTED not today &lt;b&gt;</code>`,
			"decided by alice",
			`href="`+page(rejection)+`"`,
			"rejection by alice",
			"DEPENDENCY_FAILED step send failed_final",
		)
		if strings.Contains(body, `<form class="decide`) {
			t.Error("a rejected step has decision forms")
		}
	})
	t.Run("unreadable ledger", func(t *testing.T) {
		// An execution whose first event is not an event: listed with the
		// error, the others still listed; its page is a 500 page.
		bogus := put(t, f.s, asl.Untagged([]byte("not a submission")))
		if err := f.s.Pin(ctx, plan.EventPinName(bogus, 1), bogus, asl.PinOptions{}); err != nil {
			t.Fatal(err)
		}
		expect(t, h, prefix+"plans/", http.StatusOK,
			`title="`+bogus.String()+`"`, `<span class="badge st-failed">unreadable</span>`,
			`<span class="badge st-wait">waiting</span>`)
		expect(t, h, prefix+"plans/"+bogus.String(), http.StatusInternalServerError)
	})
	t.Run("errors", func(t *testing.T) {
		expect(t, h, prefix+"plans/0001zz", http.StatusBadRequest, "malformed reference")
		expect(t, h, prefix+"plans/"+f.plan.String(), http.StatusNotFound, "execution not found")
		expect(t, newHandler(f.s), prefix+"plans/", http.StatusNotFound, "no plans here")
	})
}
