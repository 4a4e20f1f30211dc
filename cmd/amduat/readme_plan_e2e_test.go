package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/wasmop/examples"
)

// TestReadmePlanWalkthrough runs the README's plan walkthrough ("Plans:
// effects at the boundary") as written, with bash, the amduat under test
// first on PATH, from the repository root. The one change is the port: the
// README's 127.0.0.1:8765 becomes a free loopback port of the test's, so
// that runs beside each other do not collide; the service itself is the
// `amduat demo --plan-service` the block starts. It checks what the README
// says happens: the runner killed mid-call leaves fetch running at attempt
// 1; the resumed run stops waiting for the post's approval with the count
// "9\n"; after the approval the execution completes; the replay verifies
// every step; and the service saw the fetch's key twice (the stalled call
// and its repetition with the same key) and exactly one POST, recording
// "9\n".
func TestReadmePlanWalkthrough(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to run the README's commands")
	}
	root, err := examples.ModuleRoot(context.Background(), ".")
	if err != nil {
		t.Fatal(err)
	}
	block := readmeBlock(t, root, "plans")
	if !strings.Contains(block, "127.0.0.1:8765") {
		t.Fatal("the README's plan walkthrough no longer names 127.0.0.1:8765, the address this test replaces")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	block = strings.ReplaceAll(block, "127.0.0.1:8765", addr)

	cmd := exec.Command(bash, "-eu", "-o", "pipefail", "-c", block)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(amduatBin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"TMPDIR="+t.TempDir(), "AMDUAT_STORE=", "GORACE=atexit_sleep_ms=20")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("walkthrough failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	nine := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("9\n")))
	for _, want := range []string{
		"status running events 3\nstep count pending attempts 0\nstep fetch running attempts 1\n",
		"status waiting events 10\n",
		"step post waiting_approval attempts 0 reason REQUIRES_APPROVAL\n",
		"output count 0 " + nine.String() + "\n",
		"blocked_on post REQUIRES_APPROVAL gate-post\n",
		"status completed events 14\nstep count succeeded attempts 0\nstep fetch succeeded attempts 2\nstep post succeeded attempts 1\n",
		"ok count pel succeeded ", "ok fetch http succeeded ", "ok post http succeeded ",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("walkthrough output lacks %q:\n%s\nstderr:\n%s", want, out, stderr.String())
		}
	}
	gets := regexp.MustCompile(`(?m)^GET /doc\.txt key ([0-9a-f]{64}) call (\d): (.*)$`).FindAllStringSubmatch(out, -1)
	if len(gets) != 2 || gets[0][1] != gets[1][1] || gets[0][3] != "stalled until the client goes away" || gets[1][3] != "200, 45 bytes" {
		t.Fatalf("the service's GETs %q, want the stalled call and one repetition with the same key", gets)
	}
	posts := regexp.MustCompile(`(?m)^POST .*$`).FindAllString(out, -1)
	if len(posts) != 1 || !strings.HasSuffix(posts[0], ` call 1: 200, recorded "9\n"`) {
		t.Fatalf("the service's POSTs %q, want exactly one recording \"9\\n\"", posts)
	}
}
