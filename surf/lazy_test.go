package surf_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/internal/longtest"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
)

// peakHeap samples the bytes of live heap objects every millisecond while
// f runs and returns the largest sample above the level before f.
func peakHeap(f func()) uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	base := s[0].Value.Uint64()
	var peak uint64
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(done)
	wg.Wait()
	if peak < base {
		return 0
	}
	return peak - base
}

// TestDoubleConcatBoundedMemory: concat(x, x) over a 96 MiB input on a
// Pebble store (288 MiB flowing: the input and a 192 MiB output) holds far
// less than one copy of the input. Before lazy runs it held the input and
// the output (288 MiB). The bound scales the bench target (1 GiB within
// 128 MiB of peak RSS) down to the heap of this run: 288/8 = 36 MiB. The
// default run uses a 48 MiB input (bound 18 MiB); AMDUAT_LONG=1
// (internal/longtest) the 96 MiB.
func TestDoubleConcatBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 144 MiB")
	}
	ctx := context.Background()
	st, err := pebblestore.Create(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	size := longtest.Logf(t, "input MiB", 48, 96) << 20
	bound := uint64(3 * size / 8)
	x := make([]byte, size)
	for i := range x {
		x[i] = byte(i*7 + i>>13)
	}
	in := put(t, st, asl.Untagged(x))
	// The reference of x||x, hashed as a stream: no third copy of the
	// bytes in the test's own heap.
	h, err := asl.NewHasher(asl.HashSHA256, asl.Header{Size: uint64(2 * size)})
	if err != nil {
		t.Fatal(err)
	}
	h.Write(x)
	h.Write(x)
	want, err := h.Sum()
	if err != nil {
		t.Fatal(err)
	}
	x = nil
	prog := seed(t, st, pel.SeedConcat)
	var run *surf.Run
	var progress []surf.Progress
	opts := surf.Options{NoCache: true, Progress: func(p surf.Progress) { progress = append(progress, p) }}
	peak := peakHeap(func() {
		run, err = surf.New(st, opts).Run(ctx, surf.Request{ProgramRef: prog, InputRefs: []asl.Reference{in, in}})
	})
	if err != nil || run.Result.Value.Status != pel.StatusOK {
		t.Fatal(err)
	}
	if run.OutputRefs[0] != want || run.Outputs != nil {
		t.Fatalf("output %s (in memory: %t), want %s streamed", run.OutputRefs[0], run.Outputs != nil, want)
	}
	t.Logf("peak heap above the start: %d MiB", peak>>20)
	if peak > bound {
		t.Fatalf("the run held %d MiB of heap; 3*%d MiB flowed through it, the bound is %d MiB", peak>>20, size>>20, bound>>20)
	}
	// The stored output reads back whole and verified (Fetch's reader
	// checks the digest at its end).
	rc, hdr, err := st.Fetch(ctx, run.OutputRefs[0])
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, rc)
	rc.Close()
	if err != nil || n != int64(2*size) || hdr.Size != uint64(2*size) {
		t.Fatalf("stored output: %d bytes read, header %d, %v", n, hdr.Size, err)
	}
	last := progress[len(progress)-1]
	if last.NodesDone != 1 || last.NodesTotal != 1 || last.BytesWritten != uint64(2*size) || last.BytesTotal != uint64(2*size) || len(progress) < 10 {
		t.Fatalf("progress %d reports, last %+v", len(progress), last)
	}
}

// TestDamagedInputMidRunStoresNothing: an input verified at the start of a
// run and damaged before its bytes are read again ends the run with an
// error wrapping ErrIntegrity, and nothing is stored.
func TestDamagedInputMidRunStoresNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := memstore.New()
	x := bytes.Repeat([]byte("v"), 3<<20)
	in := put(t, st, asl.Untagged(x))
	prog := seed(t, st, pel.SeedConcat)
	before := st.Len()
	damage := func(surf.Progress) { st.Corrupt(in, bytes.Repeat([]byte("w"), 3<<20)) }
	// Progress is reported after the node, whose output reference the
	// trace has already read: the damage is found when the output is read
	// again to be stored.
	_, err := surf.New(st, surf.Options{NoCache: true, NoLog: true, Progress: damage}).Run(ctx,
		surf.Request{ProgramRef: prog, InputRefs: []asl.Reference{in, in, in, in, in, in}})
	if !errors.Is(err, asl.ErrIntegrity) {
		t.Fatalf("err = %v, want ErrIntegrity", err)
	}
	if st.Len() != before {
		t.Fatalf("store grew from %d to %d", before, st.Len())
	}
}

// TestLargeInputsLazy: inputs above MaxArtifact are read lazily by the
// kernel (a result), while an operation that reads its inputs whole is
// refused them (an operational error, nothing stored).
func TestLargeInputsLazy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := memstore.New()
	in := put(t, st, asl.Untagged(bytes.Repeat([]byte("y"), 2<<20)))
	prog := seed(t, st, pel.SeedHash)
	run, err := surf.New(st, surf.Options{MaxArtifact: 1 << 20}).Run(ctx, surf.Request{ProgramRef: prog, InputRefs: []asl.Reference{in}})
	if err != nil || run.Result.Value.Status != pel.StatusOK {
		t.Fatalf("kernel hash of an input above MaxArtifact: %v", err)
	}
	var out bytes.Buffer
	rc, _, err := st.Fetch(ctx, run.OutputRefs[0])
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(&out, rc)
	rc.Close()
	if out.Len() != 32 {
		t.Fatalf("hash output %d bytes", out.Len())
	}
}
