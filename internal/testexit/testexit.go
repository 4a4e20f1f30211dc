// Package testexit ends a test binary without the pause the race runtime
// takes at a successful exit (issue 25).
//
// A binary built with -race that exits with status 0 through os.Exit
// first sleeps for GORACE's atexit_sleep_ms (1,000 ms unless set), so that
// goroutines still running can report races. `go test` runs at most -p
// test binaries at a time (one per core), so each package's pause holds a
// slot idle: about 20 s of wall time for this module's 40 test packages on
// two cores. When m.Run returns, the testing package has already failed
// every test during which a race was reported; what the pause would add is
// a report from a goroutine still running after the last test.
package testexit

import (
	"os"
	"syscall"
	"testing"
)

// Main runs m's tests and exits with their status, as the TestMain a
// package would otherwise not need.
func Main(m *testing.M) { Exit(m.Run()) }

// Exit ends the process with code. A successful exit of a race build goes
// straight to the kernel; every other exit goes through os.Exit (whose
// exit hooks the race runtime's pause follows only for status 0).
func Exit(code int) {
	if code == 0 && raceEnabled {
		syscall.Exit(0)
	}
	os.Exit(code)
}
