package main

import (
	"os"
	"sync"
	"testing"

	"github.com/amduat/amduat/asl/s3store/miniotest"
)

// sharedMinio is the one MinIO the end-to-end tests of this package share
// (issue 25: a start costs seconds on a loaded machine): each test uses a
// bucket of its own name, none stops the server. It starts at the first
// startMinio and stops when TestMain ends.
var sharedMinio struct {
	once sync.Once
	dir  string
	m    *miniotest.Server
	err  error
}

// startMinio returns the shared MinIO (skipping t without one); its
// credentials are in this process's environment (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY), which the commands inherit, so tests that use it
// may run in parallel. A test that stops or restarts its server starts one
// of its own with miniotest.Start.
func startMinio(t *testing.T) *miniotest.Server {
	t.Helper()
	if miniotest.Binary() == "" {
		t.Skip(miniotest.SkipMessage)
	}
	sharedMinio.once.Do(func() {
		dir, err := os.MkdirTemp("", "amduat-e2e-minio-*")
		if err != nil {
			sharedMinio.err = err
			return
		}
		sharedMinio.dir = dir
		m, err := miniotest.Launch(dir)
		if err != nil {
			sharedMinio.err = err
			return
		}
		sharedMinio.m = m
		os.Setenv("AWS_ACCESS_KEY_ID", m.AccessKey)
		os.Setenv("AWS_SECRET_ACCESS_KEY", m.SecretKey)
	})
	if sharedMinio.err != nil {
		t.Fatalf("starting the shared MinIO: %v", sharedMinio.err)
	}
	return sharedMinio.m
}

// stopSharedMinio stops the shared MinIO, if one was started, and removes
// its data.
func stopSharedMinio() {
	if sharedMinio.m != nil {
		sharedMinio.m.Stop()
	}
	if sharedMinio.dir != "" {
		os.RemoveAll(sharedMinio.dir)
	}
}
