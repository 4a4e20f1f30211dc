package s3store_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/amduat/amduat/asl/s3store/miniotest"
	"github.com/amduat/amduat/internal/testexit"
)

// shared is the one MinIO the tests that never stop their server share;
// each test works under a prefix of its own (create), so they run in
// parallel. Tests that stop or restart MinIO take turns on another
// (stoppableServer).
var shared = miniotest.Shared{Prefix: "s3store-test-minio-*"}

// sharedServer returns the shared MinIO, skipping t when none is
// installed.
func sharedServer(t *testing.T) *miniotest.Server {
	t.Helper()
	return shared.Get(t)
}

// stoppable is the one MinIO the tests that stop and restart their server
// (TestCache, TestRestart, TestRestartUnderLoad) take in turn
// (miniotest.Server.Borrow), each under buckets of its own: one start
// where each started its own (issue 25).
var stoppable = miniotest.Shared{Prefix: "s3store-test-minio-*"}

// stoppableServer borrows the stoppable MinIO for t (waiting while another
// test holds it), skipping t when none is installed; t may stop and
// restart it.
func stoppableServer(t *testing.T) *miniotest.Server {
	t.Helper()
	m := stoppable.Get(t)
	m.Borrow(t)
	return m
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, s := range []*miniotest.Shared{&shared, &stoppable} {
		if err := s.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	testexit.Exit(code)
}
