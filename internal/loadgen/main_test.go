package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestRun: the command runs -runs times beside the load, each run's wall
// time is printed, the first failing run's exit code is loadgen's, and
// usage errors are exit 2.
func TestRun(t *testing.T) {
	cases := []struct {
		args  []string
		code  int
		runs  int // "run N of" lines printed
		inErr string
	}{
		{[]string{"-workers", "2", "-runs", "3", "--", "sh", "-c", "exit 0"}, 0, 3, ""},
		{[]string{"-runs", "3", "--", "sh", "-c", "exit 3"}, 3, 1, ""},
		{[]string{"-runs", "0", "--", "true"}, 2, 0, "at least 1"},
		{[]string{"-nosuchflag"}, 2, 0, "usage: loadgen"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(c.args, &out, &errb); code != c.code {
				t.Fatalf("exit %d, want %d; stderr %s", code, c.code, errb.String())
			}
			if n := strings.Count(out.String(), "loadgen: run "); n != c.runs {
				t.Errorf("%d runs reported, want %d: %s", n, c.runs, out.String())
			}
			if !strings.Contains(errb.String(), c.inErr) {
				t.Errorf("stderr %q does not say %q", errb.String(), c.inErr)
			}
		})
	}
}
