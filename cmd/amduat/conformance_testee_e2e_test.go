package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConformanceTestE2E: "amduat conformance test -- amduat conformance
// testee" passes every vector and generated case; --json gives the §21.5
// object; a testee that is not one exits 6; a missing "--" is a usage
// error; an expected failure listed by exact id that passes exits 1.
func TestConformanceTestE2E(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	r := c.must(0, "conformance", "test", "--generate", "300", "--seed", "4", "--", amduatBin, "conformance", "testee")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(strings.TrimSpace(last), "total") || !strings.Contains(last, " 0 failed, 0 skipped, 0 expected failures, 0 unexpected passes") {
		t.Fatalf("last line %q", last)
	}
	if !strings.Contains(r.stdout, "testee amduat-go:") || !strings.Contains(r.stdout, "asl.artifact ") {
		t.Fatalf("stdout:\n%s", r.stdout)
	}

	r = c.must(0, "--json", "conformance", "test", "--no-vectors", "--generate", "100", "--", amduatBin, "conformance", "testee")
	var rep struct {
		Implementation string `json:"implementation"`
		Cases          int    `json:"cases"`
		OK             bool   `json:"ok"`
		Total          struct {
			Passed int `json:"passed"`
		} `json:"total"`
		Failures []any `json:"failures"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if !rep.OK || rep.Cases != 100 || rep.Total.Passed != 100 || rep.Failures == nil || rep.Implementation != "amduat-go" {
		t.Fatalf("json report %+v", rep)
	}

	xf := filepath.Join(c.cwd, "xfail.txt")
	if err := os.WriteFile(xf, []byte("asl.artifact.encode.untagged-empty # passes: an unexpected pass\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = c.must(1, "conformance", "test", "--categories", "asl.artifact", "--expected-failures", xf, "--", amduatBin, "conformance", "testee")
	if !strings.Contains(r.stdout, "UNEXPECTED_PASS asl.artifact.encode.untagged-empty") {
		t.Fatalf("stdout:\n%s", r.stdout)
	}
	if _, err := os.Stat(filepath.Join(c.cwd, "conformance-failures")); !os.IsNotExist(err) {
		t.Errorf("failure directory created without a failure: %v", err)
	}

	c.must(6, "conformance", "test", "--", "/bin/sh", "-c", "exit 0")
	c.must(2, "conformance", "test", amduatBin)
}
