package testexit_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/amduat/amduat/internal/testexit"
)

const childEnv = "AMDUAT_TESTEXIT_CHILD"

func TestMain(m *testing.M) { testexit.Main(m) }

// TestChild passes or fails as its parent asks (childEnv); it is skipped
// in a run of its own.
func TestChild(t *testing.T) {
	switch os.Getenv(childEnv) {
	case "":
		t.Skip("the child of TestMainKeepsTheStatus")
	case "fail":
		t.Fatal("failing as asked")
	}
}

// TestMainKeepsTheStatus: a test binary ending through Main exits 0
// after its tests pass and 1 after one fails, with the testing package's
// last line written either way.
func TestMainKeepsTheStatus(t *testing.T) {
	for _, c := range []struct {
		mode, last string
		code       int
	}{{"pass", "PASS", 0}, {"fail", "FAIL", 1}} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), childEnv+"="+c.mode)
		out, err := cmd.CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if code != c.code || lines[len(lines)-1] != c.last {
			t.Errorf("%s: exit %d, last line %q; want %d and %q\n%s", c.mode, code, lines[len(lines)-1], c.code, c.last, out)
		}
	}
}
