package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/amduat/amduat/internal/longtest"
)

// Bounds on what this module's packages may allocate in their package
// initialisation (issue 24). Go runs the init of every linked package
// before main, whatever the subcommand, so a table, template or regular
// expression built at init is paid by `amduat version`, `has` and `get`.
// Before issue 24 the web view's templates took 235 KB in 4,057
// allocations, conformance's case tables 40 KB, pel build's regular
// expressions 30 KB; now the largest project init is conformance's
// registration maps and references (about 25 KB in 110 allocations with
// the plan vectors), all of them together about 40 KB. Anything heavier
// belongs behind a sync.Once or a constructor.
//
// maxAllInitBytes and maxAllInitAllocs bound the inits of every linked
// package, third-party and standard library included, just above what
// `amduat version` reached once the Prometheus client's collectors and
// HTTP handler gave way to internal/metrics and schollz/progressbar to
// progress.go: 985 KB in 6,562 allocations over 244 inits (Go 1.26.8),
// or 1,022 KB in the runs where cockroachdb/errors/report allocates 37 KB
// instead of 80 bytes (from a few runs in 25 to half of them; it was
// 1,020 KB or 1,057 KB in 6,824 allocations before). What is left is
// linked by dependencies this module cannot unlink: Pebble pulls the
// Prometheus client (with procfs, protobuf, client_model, common and a
// YAML library) and cockroachdb/errors (with sentry-go and gogo
// protobuf); minio-go pulls pkg/s3utils (281 KB alone), a second YAML
// library, rs/xid, go-humanize and klauspost/cpuid. A new dependency or a
// package-level table that pushes the sum past the bound fails the test:
// build it on first use, or raise the bound with the measurement that
// justifies it.
const (
	maxInitBytes      = 32 << 10 // one package
	maxInitAllocs     = 192      // one package
	maxInitBytesTotal = 64 << 10 // all of this module's packages
	maxAllInitBytes   = 1_032_000
	maxAllInitAllocs  = 6_650
)

// initLine is one line of GODEBUG=inittrace=1:
// "init PKG @T ms, C ms clock, B bytes, N allocs".
var initLine = regexp.MustCompile(`^init (\S+) @[0-9.]+ ms, ([0-9.]+) ms clock, ([0-9]+) bytes, ([0-9]+) allocs$`)

type initCost struct {
	pkg           string
	clockMS       float64
	bytes, allocs int64
}

// parseInitTrace reads the init lines of GODEBUG=inittrace=1 output.
func parseInitTrace(out []byte) ([]initCost, error) {
	var cs []initCost
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "init ") {
			continue
		}
		m := initLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("unrecognised inittrace line %q", line)
		}
		c := initCost{pkg: m[1]}
		c.clockMS, _ = strconv.ParseFloat(m[2], 64)
		c.bytes, _ = strconv.ParseInt(m[3], 10, 64)
		c.allocs, _ = strconv.ParseInt(m[4], 10, 64)
		cs = append(cs, c)
	}
	return cs, sc.Err()
}

func TestParseInitTrace(t *testing.T) {
	out := []byte("amduat 1.0\ninit internal/bytealg @0.006 ms, 0.003 ms clock, 0 bytes, 0 allocs\n" +
		"init github.com/amduat/amduat/opreg @1.2 ms, 0.076 ms clock, 1848 bytes, 19 allocs\n")
	cs, err := parseInitTrace(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []initCost{{"internal/bytealg", 0.003, 0, 0}, {"github.com/amduat/amduat/opreg", 0.076, 1848, 19}}
	if !slices.Equal(cs, want) {
		t.Fatalf("got %+v, want %+v", cs, want)
	}
	if _, err := parseInitTrace([]byte("init x @garbage\n")); err == nil {
		t.Fatal("a malformed init line was accepted")
	}
}

// TestPackageInitsStaySmall runs `amduat version` with GODEBUG=inittrace=1
// and fails when a package of this module allocates more than
// maxInitBytes or maxInitAllocs at init. Allocations, not clock times, are
// checked: they do not depend on the machine's load. The heaviest
// third-party inits are logged (they cannot be deferred: only not linking
// a package avoids its init), and the sum of all inits is bounded by
// maxAllInitBytes and maxAllInitAllocs.
func TestPackageInitsStaySmall(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(amduatBin, "version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("amduat version: %v: %s", err, stderr.String())
	}
	cs, err := parseInitTrace(stderr.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) < 10 {
		t.Fatalf("only %d init lines in GODEBUG=inittrace=1 output: %s", len(cs), stderr.String())
	}
	var third []initCost
	var total, ours initCost
	for _, c := range cs {
		total.bytes += c.bytes
		total.allocs += c.allocs
		total.clockMS += c.clockMS
		if c.pkg == "main" || strings.HasPrefix(c.pkg, "github.com/amduat/amduat/") {
			ours.bytes += c.bytes
			ours.allocs += c.allocs
			if c.bytes > maxInitBytes || c.allocs > maxInitAllocs {
				t.Errorf("init of %s allocates %d bytes in %d allocations (bound %d bytes, %d allocations): build it on first use", c.pkg, c.bytes, c.allocs, maxInitBytes, maxInitAllocs)
			}
			continue
		}
		third = append(third, c)
	}
	if ours.bytes > maxInitBytesTotal {
		t.Errorf("this module's package inits allocate %d bytes in %d allocations in all (bound %d bytes)", ours.bytes, ours.allocs, maxInitBytesTotal)
	}
	// A race build (the long step's) instruments allocation differently;
	// the bound is for the binary users run.
	if !(raceEnabled && longtest.Enabled()) && (total.bytes > maxAllInitBytes || total.allocs > maxAllInitAllocs) {
		t.Errorf("all %d package inits allocate %d bytes in %d allocations (bound %d bytes, %d allocations): a new dependency or package-level state is paid by every command", len(cs), total.bytes, total.allocs, maxAllInitBytes, maxAllInitAllocs)
	}
	slices.SortFunc(third, func(a, b initCost) int { return int(b.bytes - a.bytes) })
	t.Logf("%d package inits: %d bytes, %d allocations, %.2f ms clock in all; this module's: %d bytes, %d allocations", len(cs), total.bytes, total.allocs, total.clockMS, ours.bytes, ours.allocs)
	for _, c := range third[:min(len(third), 10)] {
		t.Logf("third-party init %s: %d bytes, %d allocs, %.3f ms", c.pkg, c.bytes, c.allocs, c.clockMS)
	}
}
