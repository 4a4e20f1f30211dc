package plan

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// checkGolden compares got with testdata/name, or rewrites it under -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := "testdata/" + name
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update once to create it)", err, t.Name())
	}
	if string(want) != got {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) && i < len(wl); i++ {
			if gl[i] != wl[i] {
				t.Fatalf("%s line %d:\n got  %s\n want %s", path, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("%s: %d lines, want %d", path, len(gl), len(wl))
	}
}

// transitionMatrix renders, for every state and every event type, the
// state the event may move a step to ("-" when none): the vectors of
// SPECS.md §24.2.
func transitionMatrix() string {
	var b strings.Builder
	b.WriteString("# amduat plan step transitions (SPECS.md §24.2): FROM EVENT -> TO, '-' when illegal\n")
	for from := StatePending; from <= StateBlocked; from++ {
		for ev := EventSubmitted; ev <= EventResumed; ev++ {
			var tos []string
			for to := StatePending; to <= StateBlocked; to++ {
				if CheckTransition(from, to, ev) == nil {
					tos = append(tos, to.String())
				}
			}
			if len(tos) == 0 {
				tos = []string{"-"}
			}
			fmt.Fprintf(&b, "%s %s -> %s\n", from, ev, strings.Join(tos, ","))
		}
	}
	return b.String()
}

func TestTransitionsGolden(t *testing.T) {
	t.Parallel()
	checkGolden(t, "transitions.golden", transitionMatrix())
}

func TestCheckTransition(t *testing.T) {
	t.Parallel()
	legal := 0
	for from := StatePending; from <= StateBlocked; from++ {
		for to := StatePending; to <= StateBlocked; to++ {
			for ev := EventSubmitted; ev <= EventResumed; ev++ {
				err := CheckTransition(from, to, ev)
				if err == nil {
					legal++
					continue
				}
				if !errors.Is(err, ErrIllegalTransition) {
					t.Fatalf("%s -> %s by %s: %v does not wrap ErrIllegalTransition", from, to, ev, err)
				}
			}
		}
	}
	if legal != len(Transitions) {
		t.Fatalf("%d legal triples, %d in the table (a duplicate row?)", legal, len(Transitions))
	}
	for _, tc := range []struct {
		from, to StepState
		by       EventType
	}{
		{StateSucceeded, StateRunning, EventStepStarted},
		{StatePending, StateRunning, EventStepStarted},
		{StateWaitingApproval, StateRunning, EventStepStarted},
		{StateUnknownOutcome, StateRunning, EventStepStarted},
		{StateCancelled, StateReady, EventRetryRequested},
		{StateFailedRetryable, StateRunning, EventStepStarted},
	} {
		if CheckTransition(tc.from, tc.to, tc.by) == nil {
			t.Errorf("%s -> %s by %s is accepted", tc.from, tc.to, tc.by)
		}
	}
}
