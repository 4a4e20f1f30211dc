package s3store_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/amduat/amduat/asl/s3store/miniotest"
	"github.com/amduat/amduat/internal/testexit"
)

// shared is the package's one MinIO (a start costs more than a CPU second;
// issue 25). The tests that never stop it run in parallel, each under a
// prefix of its own (create). The tests that stop and restart it
// (TestCache, TestRestart, TestRestartUnderLoad; stoppableServer) are not
// parallel: go test runs every sequential top-level test, one at a time,
// before it releases the parallel ones, so they have the server to
// themselves and leave it running for the rest.
var shared = miniotest.Shared{Prefix: "s3store-test-minio-*"}

// sharedServer returns the shared MinIO, skipping t when none is
// installed.
func sharedServer(t *testing.T) *miniotest.Server {
	t.Helper()
	return shared.Get(t)
}

// stoppableServer lends the shared MinIO to t, a test that may stop and
// restart it and must therefore not call t.Parallel (see shared). At t's
// end a server left stopped (t failed between a Stop and a Restart) is
// restarted for the parallel tests.
func stoppableServer(t *testing.T) *miniotest.Server {
	t.Helper()
	m := shared.Get(t)
	m.Borrow(t)
	t.Cleanup(func() {
		if m.PID() == 0 {
			m.Restart()
		}
	})
	return m
}

func TestMain(m *testing.M) {
	code := m.Run()
	if err := shared.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	testexit.Exit(code)
}
