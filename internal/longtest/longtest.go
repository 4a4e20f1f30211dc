// Package longtest says whether a test run asks for the exhaustive
// variants of the long tests (thousands of flips, long load runs, kill
// loops): AMDUAT_LONG=1, which .ci/run sets in a step of its own. The
// README's `go test -race -count=1 ./...` runs every test, each long one
// in a smaller variant of the same checks, so that it stays within its
// time (issue 25); nothing a long variant checks is left out of CI.
package longtest

import (
	"os"
	"testing"
)

// Env is the environment variable that asks for the long variants.
const Env = "AMDUAT_LONG"

// Enabled reports whether AMDUAT_LONG=1.
func Enabled() bool { return os.Getenv(Env) == "1" }

// Count is short in the default run and long under AMDUAT_LONG=1.
func Count(short, long int) int {
	if Enabled() {
		return long
	}
	return short
}

// Logf notes in t's log which variant runs, so a reader of the output
// knows what was checked.
func Logf(t testing.TB, what string, short, long int) int {
	t.Helper()
	n := Count(short, long)
	if Enabled() {
		t.Logf("%s: %d (%s=1; the default run does %d)", what, n, Env, short)
	} else {
		t.Logf("%s: %d (%s=1 runs %d)", what, n, Env, long)
	}
	return n
}
