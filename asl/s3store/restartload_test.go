package s3store_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/s3store"
	"github.com/amduat/amduat/internal/longtest"
)

// TestRestartUnderLoad: four writers and readers (small artifacts, and
// large ones of two parts) run while MinIO is stopped and restarted. Every
// failure must be an I/O error naming the bucket (never a content error,
// never wrong bytes); every put that was acknowledged must read back
// intact at the end: nothing acknowledged is lost. The counts go to the
// log (for BENCHMARKS.md's fault figures). The default run restarts MinIO
// once; AMDUAT_LONG=1 (internal/longtest) three times (each restart and
// its rounds of load cost seconds of CPU; issue 25).
func TestRestartUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts MinIO three times")
	}
	// Not parallel: it stops the package's MinIO (stoppableServer).
	m := stoppableServer(t)
	o := options(m)
	o.MaxRetries = 2
	o.ReachWait = -1 // fail while MinIO is down, not wait for it (TestReachWait does)
	st := create(t, m, "restartload", o)
	s3store.SetPartSize(st, partSize)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	type acked struct {
		ref  asl.Reference
		seed uint64
		size int
	}
	var (
		mu                         sync.Mutex
		ack                        []acked
		puts, putFail, putOK       atomic.Int64
		gets, getFail, getOK       atomic.Int64
		contentErr, wrong, unnamed atomic.Int64
		seq                        atomic.Uint64
	)
	check := func(err error) {
		if asl.IsContentError(err) {
			contentErr.Add(1)
			t.Errorf("content error under restarts: %v", err)
		} else if !strings.Contains(err.Error(), "s3://"+st.Bucket()+"/") {
			unnamed.Add(1)
			t.Errorf("error names no object: %v", err)
		}
	}
	// progress wakes the main loop after each put, so that it waits on
	// the events themselves (puts acknowledged, puts failed), not on
	// sleeps a loaded machine may not honour.
	progress := make(chan struct{}, 1)
	notify := func() {
		select {
		case progress <- struct{}{}:
		default:
		}
	}
	waitFor := func(cond func() bool) {
		for !cond() {
			<-progress
		}
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				seed := seq.Add(1)
				size := 2000 + int(seed%1000)
				if w == 0 && i%4 == 0 {
					size = partSize + 1000 // two parts
				}
				a := asl.Untagged(gen(1000+seed, size))
				puts.Add(1)
				ref, err := asl.PutArtifact(ctx, st, asl.HashSHA256, a)
				if err != nil {
					if ctx.Err() == nil {
						putFail.Add(1)
						check(err)
					}
				} else {
					mu.Lock()
					ack = append(ack, acked{ref, seed, size})
					mu.Unlock()
					putOK.Add(1)
				}
				notify()
				mu.Lock()
				var pick acked
				if len(ack) > 0 {
					pick = ack[int(seed)%len(ack)]
				}
				mu.Unlock()
				if pick.ref.IsZero() {
					continue
				}
				gets.Add(1)
				got, err := asl.Get(ctx, st, pick.ref, 0)
				switch {
				case err != nil && ctx.Err() == nil:
					getFail.Add(1)
					check(err)
				case err == nil && !bytes.Equal(got.Bytes, gen(1000+pick.seed, pick.size)):
					wrong.Add(1)
					t.Errorf("wrong bytes for %s", pick.ref)
				case err == nil:
					getOK.Add(1)
				}
			}
		}()
	}
	// Each round: some puts acknowledged, MinIO stopped, some puts failed
	// while it is down, MinIO restarted; at the end, puts acknowledged
	// after the last restart.
	restarts := longtest.Logf(t, "MinIO restarts", 1, 3)
	for range restarts {
		ok := putOK.Load()
		waitFor(func() bool { return putOK.Load() >= ok+8 })
		m.Stop()
		failed := putFail.Load()
		waitFor(func() bool { return putFail.Load() >= failed+4 })
		m.Restart()
	}
	ok := putOK.Load()
	waitFor(func() bool { return putOK.Load() >= ok+8 })
	cancel()
	wg.Wait()
	lost := 0
	for _, a := range ack {
		got, err := asl.Get(t.Context(), st, a.ref, 0)
		if err != nil || !bytes.Equal(got.Bytes, gen(1000+a.seed, a.size)) {
			lost++
			t.Errorf("acknowledged %s lost: %v", a.ref, errors.Unwrap(err))
		}
	}
	t.Logf("%d MinIO restarts under load: puts %d (acknowledged %d, failed with I/O errors naming the object %d), gets %d (ok %d, failed with I/O errors %d), content errors %d, wrong bytes %d, errors naming no object %d; acknowledged artifacts re-read after the last restart: %d, lost %d",
		restarts, puts.Load(), putOK.Load(), putFail.Load(), gets.Load(), getOK.Load(), getFail.Load(), contentErr.Load(), wrong.Load(), unnamed.Load(), len(ack), lost)
	if putFail.Load() == 0 || putOK.Load() == 0 {
		t.Errorf("the restarts did not interrupt puts (%d failed, %d acknowledged)", putFail.Load(), putOK.Load())
	}
}
