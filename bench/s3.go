package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/s3store"
	"github.com/amduat/amduat/asl/s3store/miniotest"
)

// The s3 group measures asl/s3store (SPECS.md §6.7) against a MinIO server
// it starts on loopback (found on PATH or in $(go env GOPATH)/bin; without
// one every row is skipped with a note), each figure beside the raw
// minio-go client doing the same requests on the same server and bytes in
// the same run:
//
//   - put-batch: 1 KiB artifacts by PutBatch of 256 (one object each, 16
//     PUTs in flight) against raw PutObject of the same ArtifactBytes, 16
//     goroutines;
//   - get-random: Get (one GET, verified) of each in a shuffled order
//     against raw GetObject and a read to EOF;
//   - large-put, large-get: one large artifact streamed (multipart upload
//     to a staging key, server-side copy) and read verified, against raw
//     PutObject (the same part size) and GetObject of the same bytes.
const (
	s3Seed     = 8
	s3Batch    = 256
	s3Parallel = 16
	// s3SmallMax and s3LargeMax cap the sizes: every small artifact is an
	// object and a request, and MinIO on the same machine writes each.
	s3SmallMax = 4096
	s3LargeMax = 256 << 20
)

var s3RowNames = []string{"put-batch", "get-random", "large-put", "large-get"}

func runS3(ctx context.Context, e *Env) ([]Row, error) {
	dir, err := e.tempDir("s3")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	m, err := miniotest.Launch(dir)
	if err == miniotest.ErrNotInstalled {
		var rows []Row
		for _, n := range s3RowNames {
			rows = append(rows, Row{Name: "s3/" + n, Skipped: true, Note: miniotest.SkipMessage})
		}
		return rows, nil
	}
	if err != nil {
		return nil, err
	}
	defer m.Stop()
	st, err := s3store.Create(ctx, "bench", "s", s3store.Options{Endpoint: m.Endpoint, Insecure: true, PathStyle: true,
		AccessKey: m.AccessKey, SecretKey: m.SecretKey, Parallel: s3Parallel})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	cl := st.Client()
	var rows []Row

	n := min(e.Sizes.SmallCount, s3SmallMax)
	size := e.Sizes.SmallSize
	rng := rand.New(rand.NewPCG(s3Seed, 1))
	arts := make([]asl.Artifact, n)
	for i := range arts {
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		arts[i] = asl.Untagged(b)
	}
	// Store side.
	e.logf("s3: PutBatch of %d x %d B", n, size)
	t0 := time.Now()
	var refs []asl.Reference
	phase(ctx, "s3-put-batch", func(ctx context.Context) {
		for lo := 0; lo < n && err == nil; lo += s3Batch {
			var r []asl.Reference
			r, err = st.PutBatch(ctx, asl.HashSHA256, arts[lo:min(lo+s3Batch, n)])
			refs = append(refs, r...)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("s3/put-batch: %w", err)
	}
	dStore := time.Since(t0)
	// Raw side: the same bytes as objects under other keys.
	e.logf("s3: raw PutObject of %d x %d B", n, size)
	raw, err := runPool(s3Parallel, n, func(_, j int) error {
		b := asl.EncodeArtifact(arts[j])
		_, err := cl.PutObject(ctx, "bench", fmt.Sprintf("raw/%d", j), bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{DisableMultipart: true})
		return err
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("s3/put-batch: raw: %w", err)
	}
	rows = append(rows, Row{
		Name:     "s3/put-batch",
		Figure:   Quantity{perSec(n, dStore), "artifacts/s"},
		Baseline: &Baseline{perSec(n, raw.d), "artifacts/s", fmt.Sprintf("raw minio-go PutObject of the same ArtifactBytes, %d goroutines", s3Parallel)},
		Note: fmt.Sprintf("%d x %d B random artifacts, PutBatch of %d (one conditional PUT each, %d in flight); MinIO on loopback on this machine; store %s, raw %s (%s)",
			n, size, s3Batch, s3Parallel, dStore.Round(time.Millisecond), raw.d.Round(time.Millisecond), raw.latText()),
	})

	order := rand.New(rand.NewPCG(s3Seed, 2)).Perm(n)
	buf := make([]byte, 0, size+16)
	e.logf("s3: Get of %d x %d B", n, size)
	got, err := runPool(1, n, func(_, j int) error {
		_, err := asl.Get(ctx, st, refs[order[j]], 0)
		return err
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("s3/get-random: %w", err)
	}
	rawGet, err := runPool(1, n, func(_, j int) error {
		obj, err := cl.GetObject(ctx, "bench", fmt.Sprintf("raw/%d", order[j]), minio.GetObjectOptions{})
		if err != nil {
			return err
		}
		defer obj.Close()
		buf = buf[:0]
		_, err = io.Copy(bytes.NewBuffer(buf), obj)
		return err
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("s3/get-random: raw: %w", err)
	}
	rows = append(rows, Row{
		Name:     "s3/get-random",
		Figure:   Quantity{perSec(n, got.d), "artifacts/s"},
		Baseline: &Baseline{perSec(n, rawGet.d), "artifacts/s", "raw minio-go GetObject of the same objects, read to EOF"},
		Note:     fmt.Sprintf("each of the %d once in a shuffled order, one client, verified; store %s, raw %s", n, got.latText(), rawGet.latText()),
	})

	// Large.
	lsize := min(e.Sizes.LargeBytes, s3LargeMax)
	large := make([]byte, lsize)
	fill := rand.New(rand.NewPCG(s3Seed, 3))
	for i := 0; i+8 <= len(large); i += 8 {
		v := fill.Uint64()
		for k := range 8 {
			large[i+k] = byte(v >> (8 * k))
		}
	}
	hdr := asl.Header{Size: uint64(lsize)}
	e.logf("s3: large put of %d MiB", lsize>>20)
	t0 = time.Now()
	ref, err := st.Put(ctx, asl.HashSHA256, hdr, struct{ io.Reader }{bytes.NewReader(large)})
	if err != nil {
		return nil, fmt.Errorf("s3/large-put: %w", err)
	}
	dPut := time.Since(t0)
	t0 = time.Now()
	_, err = cl.PutObject(ctx, "bench", "raw/large", struct{ io.Reader }{bytes.NewReader(large)}, lsize,
		minio.PutObjectOptions{PartSize: s3store.DefaultPartSize, NumThreads: 1})
	if err != nil {
		return nil, fmt.Errorf("s3/large-put: raw: %w", err)
	}
	dRawPut := time.Since(t0)
	rows = append(rows, Row{
		Name:     "s3/large-put",
		Figure:   Quantity{float64(lsize) / mib / dPut.Seconds(), "MiB/s"},
		Baseline: &Baseline{float64(lsize) / mib / dRawPut.Seconds(), "MiB/s", "raw minio-go PutObject of the same bytes, same part size, streamed"},
		Note:     fmt.Sprintf("%d MiB random, streamed: multipart upload to a staging key, then a server-side copy to the artifact key", lsize>>20),
	})
	e.logf("s3: large get of %d MiB", lsize>>20)
	t0 = time.Now()
	rc, _, err := st.Fetch(ctx, ref)
	if err == nil {
		_, err = io.Copy(io.Discard, rc)
		rc.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("s3/large-get: %w", err)
	}
	dGet := time.Since(t0)
	t0 = time.Now()
	obj, err := cl.GetObject(ctx, "bench", "raw/large", minio.GetObjectOptions{})
	if err == nil {
		_, err = io.Copy(io.Discard, obj)
		obj.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("s3/large-get: raw: %w", err)
	}
	dRawGet := time.Since(t0)
	rows = append(rows, Row{
		Name:     "s3/large-get",
		Figure:   Quantity{float64(lsize) / mib / dGet.Seconds(), "MiB/s"},
		Baseline: &Baseline{float64(lsize) / mib / dRawGet.Seconds(), "MiB/s", "raw minio-go GetObject of the same bytes, read to EOF"},
		Note:     fmt.Sprintf("%d MiB, one GET streamed to EOF, every byte SHA-256 verified", lsize>>20),
	})
	return rows, nil
}
