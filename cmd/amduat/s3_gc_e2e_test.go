package main

import (
	"strings"
	"testing"

	"github.com/amduat/amduat/asl/s3store"
)

// TestS3PinRmGC: pin, rm and gc on a bucket (SPECS.md §6.7, "Pins",
// "Garbage collection"): pins are kept with their history, rm refuses a
// pinned artifact, gc keeps what is young or pinned and deletes the rest,
// and a --grace below the writers' touch age is a usage error.
func TestS3PinRmGC(t *testing.T) {
	t.Parallel()
	c, _ := bucketCLI(t, "gcli/p", "AMDUAT_S3_TOUCH_AGE=0s")
	c.write("a", []byte("kept by a pin"))
	c.write("b", []byte("garbage"))
	c.write("r", []byte("removed by rm"))
	a := strings.Fields(c.must(0, "put", "a").stdout)[0]
	b := strings.Fields(c.must(0, "put", "b").stdout)[0]
	r := strings.Fields(c.must(0, "put", "r").stdout)[0]
	c.must(0, "pin", "add", "keep", a)
	c.must(1, "pin", "add", "keep", b) // re-pointing needs --force
	c.must(0, "pin", "add", "other", r)
	if out := c.must(0, "pin", "ls").stdout; out != "keep "+a+"\nother "+r+"\n" {
		t.Fatalf("pin ls = %q", out)
	}
	c.must(1, "rm", r) // pinned
	c.must(0, "pin", "rm", "other")
	c.must(0, "rm", r)
	c.must(3, "rm", r)
	var rep s3store.GCReport
	oneJSON(t, c.must(0, "--json", "gc").stdout, &rep) // default grace: all young
	if rep.Deleted != 0 || rep.Young != 1 || rep.Reachable != 1 || rep.Pins != 1 {
		t.Fatalf("gc = %+v", rep)
	}
	oneJSON(t, c.must(0, "--json", "gc", "--grace", "0s", "--dry-run").stdout, &rep)
	if rep.Deleted != 1 || !rep.DryRun {
		t.Fatalf("gc --dry-run = %+v", rep)
	}
	out := c.must(0, "gc", "--grace", "0s").stdout
	if !strings.HasPrefix(out, "deleted 1 of 2 artifacts") {
		t.Fatalf("gc printed %q", out)
	}
	c.must(0, "get", a)
	c.must(3, "get", b)
	c.env = []string{"AMDUAT_S3_TOUCH_AGE="}
	c.must(2, "gc", "--grace", "10m") // below the default touch age (1h)
}
