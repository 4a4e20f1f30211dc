package plan

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/internal/longtest"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/plan/effect"
)

// The crash test runs the runner in a child process (this test binary
// re-executed, as Go's os/exec tests do) and kills it with SIGKILL at
// random points: inside the service's handler before it answers (a call
// cut off mid-flight, whose effect happened), or after a random delay
// (anywhere: between a claim and its event, a receipt and its pin, ...).
// Then it resumes every execution to its end and checks that no
// external_send was called twice, that every call whose outcome the
// runner could not know is surfaced as unknown_outcome, and that every
// succeeded step's receipt and outputs are stored. The default run kills
// the runner 10 times; AMDUAT_LONG=1 (internal/longtest) 100 times.

const (
	envChild = "AMDUAT_PLAN_CRASH_CHILD"
	envStore = "AMDUAT_PLAN_CRASH_STORE"
	envURL   = "AMDUAT_PLAN_CRASH_URL"
	envPlan  = "AMDUAT_PLAN_CRASH_PLAN"
	envInput = "AMDUAT_PLAN_CRASH_INPUT"
)

// crashPlan: fetch (read_only, honours keys), count (PEL), send
// (external_send, does not honour keys), send2 (external_send, honours
// keys), draft (produce_outcome, does not honour keys).
func crashPlan(t testing.TB, st asl.Receiver) *Plan {
	concat := putSeed(t, st, pel.SeedConcat)
	suffix := putBytes(t, st, " (counted)")
	count := Binding{Name: "count", Step: "count", Output: "0"}
	return &Plan{Steps: []Step{
		{ID: "count", Kind: PELStep, Program: concat, Inputs: []Binding{{Name: "0", Step: "fetch", Output: "body"}, {Name: "1", Ref: suffix}}},
		effectStep("draft", "svc", "/draft", effect.ProduceOutcome, GateNone, CacheNone, count),
		effectStep("fetch", "svck", "/dedupe/fetch", effect.ReadOnly, GateNone, CacheReuse, Binding{Name: "url", Ref: putBytes(t, st, "default-url")}),
		effectStep("send", "svc", "/send", effect.ExternalSend, GateNone, CacheNone, count),
		effectStep("send2", "svck", "/dedupe/send2", effect.ExternalSend, GateNone, CacheNone, count),
	}}
}

func crashExecutors(url string) []effect.Executor {
	return []effect.Executor{
		&testExec{name: "svc", version: "1.0", url: url},
		&testExec{name: "svck", version: "1.0", url: url, honours: true},
	}
}

// TestPlanCrashChild is the child: it submits (or attaches to) the
// execution of the plan on each input and runs it.
func TestPlanCrashChild(t *testing.T) {
	t.Parallel()
	if os.Getenv(envChild) != "1" {
		t.Skip("the child of TestPlanCrashResume")
	}
	ctx := context.Background()
	s, err := pebblestore.Open(os.Getenv(envStore), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := NewRunner(prefixPebble{s}, Options{Executors: crashExecutors(os.Getenv(envURL)), Clock: newTestClock(), CallTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	pref, err := asl.ParseReference(os.Getenv(envPlan))
	if err != nil {
		t.Fatal(err)
	}
	for _, input := range strings.Split(os.Getenv(envInput), ",") {
		in := putBytes(t, s, input)
		id, _, err := r.Submit(ctx, Submission{Plan: pref, Mode: Auto, Inputs: []effect.Input{{Name: "url", Ref: in}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Run(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPlanCrashResume(t *testing.T) {
	t.Parallel()
	if os.Getenv(envChild) == "1" {
		t.Skip("in the child")
	}
	kills := longtest.Logf(t, "kill -9 of a running plan", 10, 100)
	dir := t.TempDir()
	st := newPebble(t, dir)
	pref := putPlan(t, st, crashPlan(t, st))
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	svc := startService(t)
	seed := time.Now().UnixNano()
	if v := os.Getenv("AMDUAT_PLAN_CRASH_SEED"); v != "" {
		seed, _ = strconv.ParseInt(v, 10, 64)
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 21))
	t.Logf("seed %d (AMDUAT_PLAN_CRASH_SEED=%d repeats the kill points)", seed, seed)

	var mu sync.Mutex
	var child *exec.Cmd
	killAt := 0 // kill at this call of the round (0: by timer)
	round := 0
	svc.mu.Lock()
	svc.onCall = func(key string, n int) {
		mu.Lock()
		defer mu.Unlock()
		round++
		switch {
		case child == nil:
		case killAt > 0 && round == killAt:
			child.Process.Kill()
		case killAt < 0 && round == 1:
			// Anywhere after the first call: a ledger append, a claim,
			// a receipt's pin, a PEL run.
			c := child
			time.AfterFunc(time.Duration(-killAt)*time.Millisecond, func() { c.Process.Kill() })
		}
	}
	svc.mu.Unlock()
	start := func(input string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestPlanCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), envChild+"=1", envStore+"="+dir, envURL+"="+svc.url, envPlan+"="+pref.String(), envInput+"="+input)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	var inputs []string
	input := ""
	killed, finished := 0, 0
	for killed < kills {
		if input == "" {
			input = fmt.Sprintf("doc-%d-%d", seed, len(inputs))
			inputs = append(inputs, input)
		}
		mu.Lock()
		round, killAt = 0, -rng.IntN(15)-1
		if rng.IntN(2) == 0 {
			killAt = 1 + rng.IntN(4)
		}
		child = start(input)
		c := child
		mu.Unlock()
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		err := <-done
		mu.Lock()
		child = nil
		mu.Unlock()
		if err == nil {
			finished++
			input = "" // done: the next round starts another execution
			continue
		}
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != -1 {
			t.Fatalf("child failed (not killed): %v", err)
		}
		killed++
	}
	// Resume every execution to its end, without kills.
	if err := start(strings.Join(inputs, ",")).Wait(); err != nil {
		t.Fatalf("resume: %v", err)
	}
	checkCrashed(t, dir, svc, len(inputs), killed, finished)
}

func checkCrashed(t *testing.T, dir string, svc *service, executions, killed, finished int) {
	ctx := context.Background()
	s, err := pebblestore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st := prefixPebble{s}
	r, err := NewRunner(st, Options{Executors: []effect.Executor{failingExec{t, "svc", "1.0"}, failingExec{t, "svck", "1.0"}}})
	if err != nil {
		t.Fatal(err)
	}
	xs, err := r.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(xs) != executions {
		t.Fatalf("%d executions, want %d", len(xs), executions)
	}
	unknown, succeededSends, statuses := 0, 0, map[string]int{}
	for _, x := range xs {
		statuses[x.Status.String()]++
		if x.Status != ExecCompleted && x.Status != ExecWaiting {
			t.Errorf("%s ended %s: %s", x.ID, x.Status, stepStates(x))
		}
		for i, s := range x.Steps {
			st := x.Plan.Steps[i]
			if st.Kind != EffectStep {
				continue
			}
			key, err := x.Key(i)
			calls, effects := svc.count(key)
			if err != nil {
				calls, effects = 0, 0
			}
			honours := st.Effect == "svck"
			switch {
			case !honours && calls > 1:
				t.Errorf("%s step %s (%s, key not honoured) called %d times", x.ID, s.ID, st.Class, calls)
			case honours && effects > 1:
				t.Errorf("%s step %s acted %d times for one key", x.ID, s.ID, effects)
			}
			switch s.State {
			case StateSucceeded:
				if st.Class == effect.ExternalSend {
					succeededSends++
				}
				rc, err := r.Ledger().Receipt(ctx, s.Receipts[len(s.Receipts)-1])
				if err != nil || rc.Outcome != Succeeded {
					t.Errorf("%s step %s: receipt %+v %v", x.ID, s.ID, rc, err)
				}
				done, err := r.Ledger().pin(ctx, DonePinName(st.Effect, key, claimScope(&st, x.ID)))
				if err != nil || done.IsZero() {
					t.Errorf("%s step %s: no done pin (%v)", x.ID, s.ID, err)
				}
				for _, o := range s.Outputs {
					if ok, _ := asl.Has(ctx, r.st, o.Ref); !ok {
						t.Errorf("%s step %s: output %s not stored", x.ID, s.ID, o.Ref)
					}
				}
			case StateUnknownOutcome:
				unknown++
				if honours {
					t.Errorf("%s step %s honours keys but ended unknown", x.ID, s.ID)
				}
			default:
				t.Errorf("%s step %s ended %s", x.ID, s.ID, s.State)
			}
			if effects > 0 && s.State != StateSucceeded && s.State != StateUnknownOutcome {
				t.Errorf("%s step %s acted on the world but is %s", x.ID, s.ID, s.State)
			}
		}
		rep, err := r.Verify(ctx, x.ID)
		if err != nil || !rep.OK {
			t.Errorf("verify %s: %+v %v", x.ID, rep, err)
		}
	}
	t.Logf("%d kills, %d runs ended by themselves, %d executions %v; %d external_send steps succeeded, %d calls surfaced as unknown_outcome; 0 duplicate calls",
		killed, finished, len(xs), statuses, succeededSends, unknown)
}
