// Command loadgen keeps every core busy while it runs a command, to prove
// that the test suite does not depend on timing it does not control (issue
// 25: the suite must pass on a loaded two-core machine):
//
//	go run ./internal/loadgen -runs 3 -- go test -race -count=1 ./...
//
// It starts -workers CPU-bound goroutines (default: one per core, each
// hashing in a loop, so the load is real work, not sleeps), runs the
// command -runs times in a row with the load beside it, prints each run's
// wall time, and stops at the first run that fails. Without a command it
// loads the machine until interrupted. Its exit code is the failed run's,
// 0 when every run passed, 2 for a usage error.
package main

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"time"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	workers := fs.Int("workers", runtime.NumCPU(), "CPU-bound goroutines to run (one per core by default)")
	runs := fs.Int("runs", 1, "times to run the command in a row (it stops at the first failure)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: loadgen [-workers N] [-runs N] [-- COMMAND ARGS...]")
		fmt.Fprintln(stderr, "example: go run ./internal/loadgen -runs 3 -- go test -race -count=1 ./...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *workers < 1 || *runs < 1 {
		fmt.Fprintln(stderr, "loadgen: -workers and -runs must be at least 1")
		return 2
	}
	cmdArgs := fs.Args()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), *workers))
	for range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			spin(stop)
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	fmt.Fprintf(stdout, "loadgen: %d CPU-bound workers on %d cores\n", *workers, runtime.NumCPU())
	if len(cmdArgs) == 0 {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt)
		<-sig
		return 0
	}
	for i := 1; i <= *runs; i++ {
		start := time.Now()
		cmd := exec.Command(cmdArgs[0], cmdArgs[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, stdout, stderr
		err := cmd.Run()
		wall := time.Since(start).Round(time.Second)
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			fmt.Fprintf(stderr, "loadgen: %s: %v\n", cmdArgs[0], err)
			return 1
		}
		fmt.Fprintf(stdout, "loadgen: run %d of %d: exit %d after %s under load: %s\n", i, *runs, code, wall, strings.Join(cmdArgs, " "))
		if code != 0 {
			return code
		}
	}
	return 0
}

// spin hashes a block in a loop until stop is closed.
func spin(stop <-chan struct{}) {
	var block [4096]byte
	for {
		for range 256 {
			sum := sha256.Sum256(block[:])
			copy(block[:], sum[:])
		}
		select {
		case <-stop:
			return
		default:
		}
	}
}
