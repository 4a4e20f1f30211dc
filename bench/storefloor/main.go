// Command storefloor is the baseline of the bench rows startup/store-floor
// and startup/store-open-floor (BENCHMARKS.md, "Start-up"): a program that
// links only Pebble, the embedded store every command that reads or writes
// a local store opens (DESIGN.md, "Store"), and does nothing else; given a
// directory, it first opens the Pebble database there read-only and reads
// its first key, as `amduat has` must before it answers. Pebble's package
// inits, and those of what it imports (the Prometheus client with procfs,
// protobuf and a YAML library; cockroachdb/errors with sentry-go), run
// before main in any program that links it, so no command that opens the
// embedded store can start in less time than this program.
package main

import (
	"fmt"
	"os"

	"github.com/cockroachdb/pebble/v2"
)

// quiet drops Pebble's informational logs, as the store does.
type quiet struct{}

func (quiet) Infof(string, ...any)           {}
func (quiet) Errorf(string, ...any)          {}
func (quiet) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }

func main() {
	if len(os.Args) > 1 {
		if err := firstKey(os.Args[1]); err != nil {
			fmt.Fprintln(os.Stderr, "storefloor:", err)
			os.Exit(1)
		}
	}
	fmt.Println("hello, world")
}

// firstKey opens the Pebble database in dir read-only and reads its first
// key.
func firstKey(dir string) error {
	db, err := pebble.Open(dir, &pebble.Options{ReadOnly: true, Logger: quiet{}})
	if err != nil {
		return err
	}
	it, err := db.NewIter(nil)
	if err != nil {
		db.Close()
		return err
	}
	if !it.First() {
		err = fmt.Errorf("%s: no key", dir)
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}
