package main

import (
	"os"
	"testing"

	"github.com/amduat/amduat/asl/s3store/miniotest"
)

// sharedMinio is the one MinIO the end-to-end tests of this package share
// (issue 25: a start costs seconds on a loaded machine): each test uses a
// bucket of its own name, none stops the server. It starts at the first
// startMinio and stops when TestMain ends. Its credentials go into this
// process's environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), which
// the commands inherit.
var sharedMinio = miniotest.Shared{Prefix: "amduat-e2e-minio-*", Started: func(m *miniotest.Server) {
	os.Setenv("AWS_ACCESS_KEY_ID", m.AccessKey)
	os.Setenv("AWS_SECRET_ACCESS_KEY", m.SecretKey)
}}

// startMinio returns the shared MinIO (skipping t without one), so tests
// that use it may run in parallel. A test that stops or restarts its
// server starts one of its own with miniotest.Start.
func startMinio(t *testing.T) *miniotest.Server {
	t.Helper()
	return sharedMinio.Get(t)
}

// stopSharedMinio stops the shared MinIO, if one was started, and removes
// its data.
func stopSharedMinio() { sharedMinio.Close() }
