package testparallel

import (
	"flag"
	"fmt"
	"runtime"
	"testing"
)

func TestRaise(t *testing.T) {
	f := flag.Lookup("test.parallel")
	if f == nil {
		t.Fatal("no -test.parallel flag")
	}
	old := f.Value.String()
	t.Cleanup(func() { flag.Set("test.parallel", old) })
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if err := Raise(3); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint(3 * runtime.GOMAXPROCS(0))
	if explicit {
		want = old
	}
	if got := f.Value.String(); got != want {
		t.Fatalf("-test.parallel = %s, want %s (given on the command line: %v)", got, want, explicit)
	}
}
