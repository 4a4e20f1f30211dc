package s3store_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/s3store/miniotest"
)

// BenchmarkPutBatch1KiB: batches of 256 artifacts of 1 KiB, one object
// each, at several bounds on requests in flight (SPECS.md §6.7, "Small
// artifacts").
func BenchmarkPutBatch1KiB(b *testing.B) {
	m := miniotest.Start(b)
	for _, par := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("parallel=%d", par), func(b *testing.B) {
			o := options(m)
			o.Parallel = par
			st := createB(b, m, o)
			seed := uint64(0)
			b.SetBytes(256 << 10)
			for b.Loop() {
				arts := make([]asl.Artifact, 256)
				for i := range arts {
					seed++
					arts[i] = asl.Untagged(gen(seed, 1<<10))
				}
				if _, err := st.PutBatch(b.Context(), asl.HashSHA256, arts); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*256)/b.Elapsed().Seconds(), "artifacts/s")
		})
	}
	// The bound a packed layout could reach: the same 256 artifacts as one
	// object, one raw PUT.
	b.Run("raw-one-object", func(b *testing.B) {
		st := createB(b, m, options(m))
		b.SetBytes(256 << 10)
		seed := uint64(1 << 40)
		for b.Loop() {
			var pack []byte
			for range 256 {
				seed++
				pack = append(pack, asl.EncodeArtifact(asl.Untagged(gen(seed, 1<<10)))...)
			}
			if _, err := st.Client().PutObject(b.Context(), st.Bucket(), fmt.Sprintf("pack%d", seed), bytes.NewReader(pack), int64(len(pack)), minio.PutObjectOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*256)/b.Elapsed().Seconds(), "artifacts/s")
	})
}

// BenchmarkGet1KiB: a random get of a 1 KiB artifact (one GET, verified).
func BenchmarkGet1KiB(b *testing.B) {
	m := miniotest.Start(b)
	st := createB(b, m, options(m))
	arts := make([]asl.Artifact, 512)
	for i := range arts {
		arts[i] = asl.Untagged(gen(uint64(i), 1<<10))
	}
	refs, err := st.PutBatch(b.Context(), asl.HashSHA256, arts)
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	b.SetBytes(1 << 10)
	for b.Loop() {
		i = (i*7919 + 1) % len(refs)
		if _, err := asl.Get(b.Context(), st, refs[i], 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLarge: a 64 MiB put and get through the store against the raw
// minio-go PUT and GET of the same bytes to the same server.
func BenchmarkLarge(b *testing.B) {
	m := miniotest.Start(b)
	st := createB(b, m, options(m))
	data := gen(99, 64<<20)
	a := asl.Untagged(data)
	ctx := b.Context()
	b.Run("store/put", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			// A fresh artifact each time: an existing one is not rewritten.
			data[0]++
			if _, err := st.Put(ctx, asl.HashSHA256, a.Header(), onlyReader{bytes.NewReader(data)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	ref, err := asl.PutArtifact(ctx, st, asl.HashSHA256, a)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("store/get", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := asl.Get(ctx, st, ref, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw/put", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := st.Client().PutObject(ctx, st.Bucket(), "raw", onlyReader{bytes.NewReader(data)}, int64(len(data)),
				minio.PutObjectOptions{PartSize: 16 << 20, NumThreads: 1}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw/get", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		buf := make([]byte, len(data))
		for b.Loop() {
			obj, err := st.Client().GetObject(ctx, st.Bucket(), "raw", minio.GetObjectOptions{})
			if err != nil {
				b.Fatal(err)
			}
			n, err := obj.Read(buf)
			for err == nil && n < len(buf) {
				var k int
				k, err = obj.Read(buf[n:])
				n += k
			}
			obj.Close()
			if n != len(buf) {
				b.Fatalf("raw get: %d bytes, %v", n, err)
			}
		}
	})
}
