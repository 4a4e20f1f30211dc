package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/amduat/amduat/wasmop/examples"
)

// walkthroughRun numbers the runs of the bucket walkthrough (-count), each
// in a bucket of its own on the shared MinIO.
var walkthroughRun atomic.Int32

// readmeBlock returns the shell block of README.md after the marker
// "<!-- walkthrough: NAME -->".
func readmeBlock(t *testing.T, root, name string) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- walkthrough: " + regexp.QuoteMeta(name) + " -->\n```sh\n(.*?)\n```\n").FindSubmatch(readme)
	if m == nil {
		t.Fatalf("README.md has no shell block after <!-- walkthrough: %s -->", name)
	}
	return string(m[1])
}

// TestReadmeBackupWalkthrough runs the README's backup walkthrough as
// written, with bash, the amduat under test first on PATH: a directory put
// with put -r --pin, changed, put again, the two trees diffed, the first
// restored identical to the original (diff -r, executable bit, symlink),
// a pin removed and gc run, into a store behind amduat serve and into a
// MinIO bucket.
func TestReadmeBackupWalkthrough(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to run the README's commands")
	}
	root, err := examples.ModuleRoot(context.Background(), ".")
	if err != nil {
		t.Fatal(err)
	}
	common := readmeBlock(t, root, "backup")
	for _, where := range []string{"server", "bucket"} {
		t.Run(where, func(t *testing.T) {
			setup := readmeBlock(t, root, "backup, "+where)
			env := append(os.Environ(), "PATH="+filepath.Dir(amduatBin)+string(os.PathListSeparator)+os.Getenv("PATH"),
				"TMPDIR="+t.TempDir(), "AMDUAT_STORE=", "GORACE=atexit_sleep_ms=20")
			if where == "bucket" {
				// The shared MinIO, in a bucket of this run's own (the
				// README's "backups", numbered for -count).
				m := startMinio(t)
				setup = strings.ReplaceAll(setup, "127.0.0.1:9000", m.Endpoint)
				bucket := fmt.Sprintf("s3://backups-walkthrough-%d/", walkthroughRun.Add(1))
				if !strings.Contains(setup, "s3://backups/") {
					t.Fatalf("the README's bucket setup does not name s3://backups/:\n%s", setup)
				}
				setup = strings.ReplaceAll(setup, "s3://backups/", bucket)
				env = append(env, "AWS_ACCESS_KEY_ID="+m.AccessKey, "AWS_SECRET_ACCESS_KEY="+m.SecretKey)
			}
			cmd := exec.Command(bash, "-eu", "-o", "pipefail", "-c", setup+"\n"+common)
			cmd.Dir, cmd.Env = root, env
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("walkthrough failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
			}
			out := stdout.String()
			if !strings.Contains(out, "M notes.txt\n") || !strings.HasSuffix(out, "dear diary\n") || !strings.Contains(out, "deleted ") {
				t.Fatalf("walkthrough output lacks the diff, the gc report or the restored notes:\n%s\nstderr:\n%s", out, stderr.String())
			}
			t.Logf("walkthrough on a %s:\n%s", where, out)
		})
	}
}
