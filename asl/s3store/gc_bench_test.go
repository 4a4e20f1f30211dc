package s3store_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/s3store"
	"github.com/amduat/amduat/asl/s3store/miniotest"
)

// BenchmarkGC: one collection of a bucket holding N small artifacts (N
// from AMDUAT_S3_GC_N, default 2000; the full run uses 100000), half of
// them reached from pins through lists of 1000, the other half garbage
// older than the grace (none). It reports the artifacts listed and
// deleted per second of collection.
func BenchmarkGC(b *testing.B) {
	n := 2000
	if v := os.Getenv("AMDUAT_S3_GC_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 2 {
			b.Fatalf("AMDUAT_S3_GC_N=%q", v)
		}
	}
	m := miniotest.Start(b)
	ctx := b.Context()
	o := options(m)
	o.TouchAge = -1
	var listed, deleted int
	for i := range b.N {
		b.StopTimer()
		st := createB(b, m, o)
		st.SetChildren(childrenOf(st))
		const batch = 1000
		for lo := 0; lo < n; lo += batch {
			arts := make([]asl.Artifact, 0, batch)
			for j := lo; j < min(lo+batch, n); j++ {
				arts = append(arts, asl.Artifact{Bytes: []byte(fmt.Sprintf("bench %d artifact %d", i, j))})
			}
			refs, err := st.PutBatch(ctx, asl.HashSHA256, arts)
			if err != nil {
				b.Fatal(err)
			}
			if (lo/batch)%2 == 0 {
				root, err := asl.PutArtifact(ctx, st, asl.HashSHA256, list(refs))
				if err != nil {
					b.Fatal(err)
				}
				if err := st.Pin(ctx, fmt.Sprintf("p%d", lo), root, asl.PinOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StartTimer()
		t0 := time.Now()
		var started, marked time.Duration
		rep, err := st.GC(ctx, s3store.GCOptions{Grace: -1,
			Started:     func() { started = time.Since(t0) },
			BeforeSweep: func() { marked = time.Since(t0) }})
		b.Logf("begin %v, mark+list %v, sweep+end %v", started, marked-started, time.Since(t0)-marked)
		if err != nil {
			b.Fatal(err)
		}
		listed += rep.Listed
		deleted += rep.Deleted
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(listed)/sec, "listed/s")
	b.ReportMetric(float64(deleted)/sec, "deleted/s")
	b.ReportMetric(float64(deleted)/float64(b.N), "deleted/op")
}
