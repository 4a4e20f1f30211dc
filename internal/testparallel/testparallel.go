// Package testparallel raises the number of parallel tests of a test
// binary whose tests spend most of their time waiting: on child processes
// (cmd/amduat's end-to-end tests run the amduat binary about a thousand
// times), on fsync, or on a server. The testing package's default,
// -test.parallel = GOMAXPROCS, leaves cores idle while each of those tests
// waits, and on a machine busy with other work (issue 25's load) it leaves
// the suite two runnable threads against the others' many.
package testparallel

import (
	"flag"
	"fmt"
	"runtime"
)

// Raise sets -test.parallel to factor × GOMAXPROCS, unless the command line
// gave -test.parallel (or -parallel to go test), which then stands. It must
// be called from TestMain before m.Run; it parses the command line.
func Raise(factor int) error {
	if !flag.Parsed() {
		flag.Parse()
	}
	set := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "test.parallel" {
			set = true
		}
	})
	if set {
		return nil
	}
	n := factor * runtime.GOMAXPROCS(0)
	if err := flag.Set("test.parallel", fmt.Sprint(n)); err != nil {
		return fmt.Errorf("testparallel: set -test.parallel=%d: %w", n, err)
	}
	return nil
}
