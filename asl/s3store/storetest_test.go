package s3store_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/s3store"
	"github.com/amduat/amduat/asl/s3store/miniotest"
	"github.com/amduat/amduat/asl/storetest"
	"github.com/amduat/amduat/internal/longtest"
)

// testStore is the store under test with the suite's Corrupter hook, which
// rewrites an object behind the store's back.
type testStore struct{ *s3store.Store }

// Corrupt replaces the payload of ref's object with b, keeping the header
// the object had (so both a payload that no longer hashes and an object
// whose length disagrees with its header are exercised).
func (s testStore) Corrupt(ref asl.Reference, b []byte) bool {
	ctx := context.Background()
	var o minio.GetObjectOptions
	o.SetRange(0, 12)
	rc, err := s.Client().GetObject(ctx, s.Bucket(), s.ArtifactKey(ref), o)
	if err != nil {
		return false
	}
	head, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || len(head) < 9 {
		return false
	}
	if head[0] == 0 {
		head = head[:9]
	}
	obj := append(head, b...)
	_, err = s.Client().PutObject(ctx, s.Bucket(), s.ArtifactKey(ref), bytes.NewReader(obj), int64(len(obj)), minio.PutObjectOptions{})
	return err == nil
}

var seq atomic.Int64

func options(m *miniotest.Server) s3store.Options {
	return s3store.Options{Endpoint: m.Endpoint, Insecure: true, PathStyle: true, AccessKey: m.AccessKey, SecretKey: m.SecretKey}
}

// create makes a fresh store under a new prefix of bucket.
func create(t *testing.T, m *miniotest.Server, bucket string, o s3store.Options) *s3store.Store {
	t.Helper()
	st, err := s3store.Create(t.Context(), bucket, fmt.Sprintf("t%d", seq.Add(1)), o)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func createB(b *testing.B, m *miniotest.Server, o s3store.Options) *s3store.Store {
	b.Helper()
	st, err := s3store.Create(b.Context(), "bench", fmt.Sprintf("b%d", seq.Add(1)), o)
	if err != nil {
		b.Fatalf("Create: %v", err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// TestStoreSuite runs the shared backend suite (asl/storetest) against a
// real MinIO with the default options and, with AMDUAT_LONG=1
// (internal/longtest), again with the smallest part size (5 MiB) and
// little parallelism (2). The suite's largest artifact (3 MiB+5 at most)
// is below either part size, so the second run differs in request parallelism
// only; the multipart path has tests of its own here (TestLarge,
// TestLargeDamage, TestLargeLayout). The default run does Default alone:
// each run costs about a fifth of the package's CPU seconds (issue 25).
func TestStoreSuite(t *testing.T) {
	t.Parallel()
	m := sharedServer(t)
	for _, c := range []struct {
		name string
		long bool
		o    func(s3store.Options) s3store.Options
	}{
		{"Default", false, func(o s3store.Options) s3store.Options { return o }},
		{"SmallParts", true, func(o s3store.Options) s3store.Options { o.PartSize = 5 << 20; o.Parallel = 2; return o }},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.long && !longtest.Enabled() {
				t.Skipf("little parallelism: %s=1 runs it", longtest.Env)
			}
			t.Parallel()
			storetest.Run(t, func(t *testing.T) storetest.Backend {
				return testStore{create(t, m, "suite", c.o(options(m)))}
			})
		})
	}
}
