package s3store_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/amduat/amduat/asl/s3store/miniotest"
)

// shared is the one MinIO the tests that never stop their server share
// (issue 25: a start costs seconds on a loaded machine); each test works
// under a prefix of its own (create), so they run in parallel. Tests that
// stop or restart MinIO start their own with miniotest.Start.
var shared struct {
	once sync.Once
	dir  string
	m    *miniotest.Server
	err  error
}

// sharedServer returns the shared MinIO, skipping t when none is
// installed.
func sharedServer(t *testing.T) *miniotest.Server {
	t.Helper()
	if miniotest.Binary() == "" {
		t.Skip(miniotest.SkipMessage)
	}
	shared.once.Do(func() {
		if shared.dir, shared.err = os.MkdirTemp("", "s3store-test-minio-*"); shared.err == nil {
			shared.m, shared.err = miniotest.Launch(shared.dir)
		}
	})
	if shared.err != nil {
		t.Fatalf("starting the shared MinIO: %v", shared.err)
	}
	return shared.m
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.m != nil {
		shared.m.Stop()
	}
	if shared.dir != "" {
		if err := os.RemoveAll(shared.dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	os.Exit(code)
}
