package webui_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/plan"
	"github.com/amduat/amduat/plan/effect"
)

// planDocJSON is the program of the plans' PEL step: one constant output.
const planDocJSON = `{"nodes":[{"id":1,"op":"pel.bytes.const","version":1,"params":{"text":"hello, plan\n"}}],"roots":[{"node":1}]}`

// planJSON is the fixture's plan: a PEL step makes a document, an
// external_send behind an approval gate posts it to URL/count, and a
// second external_send, after it, posts to URL/notify.
const planJSON = `{"steps":[
 {"id":"doc","pel":{"program":"PROGRAM"}},
 {"id":"send","inputs":{"body":{"step":"doc","output":"0"}},
  "effect":{"kind":"http","params":{"method":"POST","url":"URL/count","body":"body"},
   "class":"external_send","gate":"approval","retry":{"max_attempts":3,"base_ms":100,"cap_ms":1000},"cache":"none"}},
 {"id":"notify","depends_on":["send"],
  "effect":{"kind":"http","params":{"method":"POST","url":"URL/notify"},
   "class":"external_send","gate":"none","retry":{"max_attempts":1,"base_ms":0,"cap_ms":0},"cache":"none"}}
]}`

// fixedClock is a runner clock standing at one instant; Sleep returns at
// once. With it every event and decision receipt has the same bytes on
// every run.
type fixedClock struct{}

func (fixedClock) Now() time.Time                                   { return time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC) }
func (fixedClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// planFixture is a store with executions of planJSON.
type planFixture struct {
	s      *pebblestore.Store
	runner *plan.Runner
	plan   asl.Reference
	// waiting waits for the approval of send; rejected had send
	// rejected by alice (send failed_final, notify skipped).
	waiting, rejected asl.Reference
}

// newPlanFixture stores planJSON with its service at url and runs two
// executions as far as they go without a person, with the executors exes
// (none: no call can be made).
func newPlanFixture(t testing.TB, dir, url string, exes ...effect.Executor) *planFixture {
	t.Helper()
	ctx := context.Background()
	s, err := pebblestore.Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f := &planFixture{s: s}
	prog := putProgramJSON(t, s, planDocJSON)
	p, err := plan.Build([]byte(strings.NewReplacer("PROGRAM", prog.String(), "URL", url).Replace(planJSON)))
	if err != nil {
		t.Fatal(err)
	}
	a, err := p.Artifact()
	if err != nil {
		t.Fatal(err)
	}
	f.plan = put(t, s, a)
	if f.runner, err = plan.NewRunner(s, plan.Options{Clock: fixedClock{}, Writer: "webui-test", Executors: exes}); err != nil {
		t.Fatal(err)
	}
	submit := func(label string) asl.Reference {
		t.Helper()
		id, _, err := f.runner.Submit(ctx, plan.Submission{Plan: f.plan, Label: label})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.runner.Run(ctx, id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	f.waiting = submit("waiting")
	f.rejected = submit("rejected")
	if _, err := f.runner.Reject(ctx, f.rejected, "send", "alice", "not today <b>"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.runner.Run(ctx, f.rejected); err != nil {
		t.Fatal(err)
	}
	return f
}
