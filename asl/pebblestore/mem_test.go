package pebblestore

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
)

// procStatus returns a field of /proc/self/status in bytes (Linux only).
func procStatus(field string) (int64, bool) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, field+":") {
			continue
		}
		fs := strings.Fields(line[len(field)+1:])
		if len(fs) != 2 || fs[1] != "kB" {
			return 0, false
		}
		n, err := strconv.ParseInt(fs[0], 10, 64)
		return n << 10, err == nil
	}
	return 0, false
}

// rssSampler records the peak resident set size while it runs.
type rssSampler struct {
	stop     chan struct{}
	wg       sync.WaitGroup
	peak     int64
	heapPeak uint64 // peak Go heap (objects, live and unswept)
}

func sampleRSS() *rssSampler {
	r := &rssSampler{stop: make(chan struct{})}
	r.wg.Add(1)
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	go func() {
		defer r.wg.Done()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			if v, ok := procStatus("VmRSS"); ok && v > r.peak {
				r.peak = v
			}
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > r.heapPeak {
				r.heapPeak = v
			}
			select {
			case <-r.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return r
}

func (r *rssSampler) done() int64 {
	close(r.stop)
	r.wg.Wait()
	return r.peak
}

// expectedRef hashes a generated stream without storing it.
func expectedRef(t testing.TB, id asl.HashID, seed, size uint64) asl.Reference {
	h, err := asl.NewHasher(id, asl.Header{Size: size})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyBuffer(h, newGen(seed, size, false), make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	ref, err := h.Sum()
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// TestLargeArtifactBoundedMemory streams a large incompressible artifact
// through Put and Fetch on disk and checks that the process's resident
// memory grows by far less than the artifact: 256 MiB by default, 1 GiB with
// AMDUAT_HEAVY=1, 64 MiB with -short or -race.
func TestLargeArtifactBoundedMemory(t *testing.T) {
	// Not parallel: it measures the whole process's resident memory.
	if _, ok := procStatus("VmRSS"); !ok {
		t.Skip("needs /proc/self/status")
	}
	size := uint64(256 << 20)
	switch {
	case os.Getenv("AMDUAT_HEAVY") == "1":
		size = 1 << 30
	case testing.Short() || raceEnabled:
		size = 64 << 20
	}
	const bound = 128 << 20
	ctx := context.Background()
	want := expectedRef(t, asl.HashSHA256, 7, size)
	s, err := Create(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	runtime.GC()
	debug.FreeOSMemory()
	base, _ := procStatus("VmRSS")
	rs := sampleRSS()
	ref, err := s.Put(ctx, asl.HashSHA256, asl.Header{Size: size}, newGen(7, size, false))
	if err != nil {
		t.Fatal(err)
	}
	if ref != want {
		t.Fatalf("Put returned %s, want %s", ref, want)
	}
	rc, hdr, err := s.Fetch(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := asl.NewHasher(asl.HashSHA256, hdr)
	n, err := io.Copy(h, rc)
	rc.Close()
	if err != nil || uint64(n) != size {
		t.Fatalf("Fetch: %d bytes, %v", n, err)
	}
	if got, _ := h.Sum(); got != want {
		t.Fatal("fetched bytes hash differently")
	}
	peak := rs.done()
	hwm, _ := procStatus("VmHWM")
	t.Logf("%d MiB artifact: RSS baseline %d MiB, peak %d MiB (+%d MiB), VmHWM %d MiB, Go heap peak %d MiB",
		size>>20, base>>20, peak>>20, (peak-base)>>20, hwm>>20, rs.heapPeak>>20)
	if !raceEnabled && peak-base > bound {
		t.Fatalf("resident memory grew by %d MiB streaming %d MiB, bound %d MiB", (peak-base)>>20, size>>20, bound>>20)
	}
}

// TestGenReader pins the test generator: deterministic per seed, and the
// compressible flavour compresses.
func TestGenReader(t *testing.T) {
	t.Parallel()
	a, b := genBytes(1, 10000, false), genBytes(1, 10000, false)
	if !bytes.Equal(a, b) || bytes.Equal(a, genBytes(2, 10000, false)) {
		t.Fatal("generator is not deterministic per seed")
	}
	if codec, _ := compressChunk(genBytes(1, 1<<20, true), nil, 4096); codec != codecZstd {
		t.Fatal("compressible generator output does not compress")
	}
	if codec, _ := compressChunk(genBytes(1, 1<<20, false), nil, 4096); codec != codecRaw {
		t.Fatal("random generator output compresses")
	}
}

// TestBlockCacheBesideMemtables: Options.CacheSize bytes hold table blocks
// whatever the memtables take. Pebble charges its memtables to the block
// cache; a cache of exactly CacheSize with memtables of the same size would
// keep no block at all (SPECS.md §6.4, "Tuning knobs").
func TestBlockCacheBesideMemtables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const cache = 1 << 20
	s := newMemStore(t, &Options{CacheSize: cache, MemTableSize: 1 << 20, PackMin: -1})
	var refs []asl.Reference
	for b := range 20 {
		arts := make([]asl.Artifact, 2000)
		for i := range arts {
			arts[i] = asl.Untagged(genBytes(uint64(b*len(arts)+i), 64, false))
		}
		rs, err := s.PutBatch(ctx, asl.HashSHA256, arts)
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, rs...)
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		for _, ref := range refs {
			get(t, s, ref)
		}
	}
	if got := s.db.Metrics().BlockCache.Size; got < cache*3/4 {
		t.Fatalf("block cache holds %d bytes of blocks after reading %d records twice; want at least %d of its %d", got, len(refs), cache*3/4, cache)
	}
}
