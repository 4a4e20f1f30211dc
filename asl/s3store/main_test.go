package s3store_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/amduat/amduat/asl/s3store/miniotest"
	"github.com/amduat/amduat/internal/testexit"
)

// shared is the one MinIO the tests that never stop their server share
// (issue 25: a start costs seconds on a loaded machine); each test works
// under a prefix of its own (create), so they run in parallel. Tests that
// stop or restart MinIO take turns on another (stoppableServer).
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

// stoppable is the one MinIO the tests that stop and restart their server
// (TestCache, TestRestart, TestRestartUnderLoad) take in turn
// (miniotest.Server.Borrow), each under buckets of its own: one start
// where each started its own (issue 25).
var stoppable struct {
	once sync.Once
	dir  string
	m    *miniotest.Server
	err  error
}

// stoppableServer borrows the stoppable MinIO for t (waiting while another
// test holds it), skipping t when none is installed; t may stop and
// restart it.
func stoppableServer(t *testing.T) *miniotest.Server {
	t.Helper()
	if miniotest.Binary() == "" {
		t.Skip(miniotest.SkipMessage)
	}
	stoppable.once.Do(func() {
		if stoppable.dir, stoppable.err = os.MkdirTemp("", "s3store-test-minio-*"); stoppable.err == nil {
			stoppable.m, stoppable.err = miniotest.Launch(stoppable.dir)
		}
	})
	if stoppable.err != nil {
		t.Fatalf("starting the stoppable MinIO: %v", stoppable.err)
	}
	stoppable.m.Borrow(t)
	return stoppable.m
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, s := range []struct {
		m   *miniotest.Server
		dir string
	}{{shared.m, shared.dir}, {stoppable.m, stoppable.dir}} {
		if s.m != nil {
			s.m.Stop()
		}
		if s.dir != "" {
			if err := os.RemoveAll(s.dir); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}
	}
	testexit.Exit(code)
}
