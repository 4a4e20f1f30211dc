package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl/s3store/miniotest"
	"github.com/amduat/amduat/report"
)

// TestS3TwoServers: `amduat init` and two `amduat serve` on one bucket
// (SPECS.md §6.7): a put through one is readable through the other and
// through the bucket directly, and a run through one is an action-cache
// hit through the other.
func TestS3TwoServers(t *testing.T) {
	m := miniotest.Start(t)
	t.Setenv("AWS_ACCESS_KEY_ID", m.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", m.SecretKey)
	url := fmt.Sprintf("s3://amduat/e2e?endpoint=%s&insecure=1&path-style=1", m.Endpoint)

	direct := newCLI(t)
	direct.store = url
	direct.must(7, "get", "0001"+strings.Repeat("ab", 32)) // no store yet: exit 7
	// startServe runs `init` each time: the second init of the same hash
	// on the same bucket is accepted.
	one, two := newCLI(t), newCLI(t)
	one.store = startServe(t, url)
	two.store = startServe(t, url)
	direct.must(7, "init", "--hash", "blake3") // another hash: refused

	one.write("f", []byte("through one"))
	ref := strings.Fields(one.must(0, "put", "f").stdout)[0]
	if got := two.must(0, "get", ref).stdout; got != "through one" {
		t.Fatalf("get through two = %q", got)
	}
	if got := direct.must(0, "get", ref).stdout; got != "through one" {
		t.Fatalf("get from the bucket = %q", got)
	}

	prog := strings.TrimSpace(one.must(0, "pel", "seed", "concat").stdout)
	two.write("w", []byte(" world"))
	in := strings.Fields(two.must(0, "put", "w").stdout)[0]
	args := []string{"--json", "pel", "run", "--program", prog, "--input", ref, "--input", in}
	var first, second report.Run
	oneJSON(t, one.must(0, args...).stdout, &first)
	oneJSON(t, two.must(0, args...).stdout, &second)
	if first.Status != "OK" || first.Cache == "hit" {
		t.Fatalf("first run through one = %+v", first)
	}
	if second.Cache != "hit" || second.ResultRef != first.ResultRef {
		t.Fatalf("the same run through two = %+v, want a cache hit of %s", second, first.ResultRef)
	}
	if got := direct.must(0, "get", second.OutputRefs[0].String()).stdout; got != "through one world" {
		t.Fatalf("output = %q", got)
	}
}
