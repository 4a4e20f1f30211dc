package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/internal/longtest"
)

// tagList is a test type tag: the artifact's bytes are the ReferenceBytes
// of its children, concatenated (SHA-256: 34 bytes each).
const tagList asl.TypeTag = 0x7e57

func listArt(kids ...asl.Reference) asl.Artifact {
	var b []byte
	for _, k := range kids {
		b = append(b, k.Bytes()...)
	}
	return asl.Tagged(tagList, b)
}

func listChildren(s *Store) func(context.Context, asl.Info) ([]asl.Reference, error) {
	return func(ctx context.Context, in asl.Info) ([]asl.Reference, error) {
		if !in.HasTag || in.Tag != tagList {
			return nil, nil
		}
		a, err := asl.Get(ctx, s, in.Ref, 0)
		if err != nil {
			return nil, err
		}
		var out []asl.Reference
		for b := a.Bytes; len(b) >= 34; b = b[34:] {
			r, err := asl.DecodeReference(b[:34])
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		return out, nil
	}
}

// testSpace is an index space whose entry value names one artifact.
const testSpace = "test.names"

func gcOpts(s *Store) GCOptions {
	return GCOptions{
		Children: listChildren(s),
		Trim: []TrimRule{{Space: testSpace, Refs: func(_, v []byte) []asl.Reference {
			r, err := asl.DecodeReference(v)
			if err != nil {
				return nil
			}
			return []asl.Reference{r}
		}}},
	}
}

// gcWorld is a store's contents: what the pins reach (with the bytes) and
// what they do not.
type gcWorld struct {
	reach   map[asl.Reference]asl.Artifact
	unreach map[asl.Reference]asl.Artifact
	entries int // test.names entries naming unreachable artifacts
}

// buildWorld fills s: n groups, each a pinned list reaching leaves (small
// and large, some shared) and an unpinned list reaching its own leaves;
// packs mix live and dead records.
func buildWorld(t testing.TB, s *Store, n int, large bool) *gcWorld {
	t.Helper()
	ctx := context.Background()
	w := &gcWorld{reach: map[asl.Reference]asl.Artifact{}, unreach: map[asl.Reference]asl.Artifact{}}
	shared := asl.Untagged([]byte("shared leaf"))
	sharedRef := put(t, s, asl.HashSHA256, shared)
	w.reach[sharedRef] = shared
	for g := range n {
		var live, dead []asl.Artifact
		for i := range 6 {
			live = append(live, asl.Untagged(uniqBytes(uint64(1000*g+i), 100+i*300, i%2 == 0)))
			dead = append(dead, asl.Untagged(uniqBytes(uint64(1000*g+500+i), 300+i*900, i%2 == 1)))
		}
		if large && g%2 == 0 {
			live = append(live, asl.Untagged(uniqBytes(uint64(1000*g+99), 2*MinChunkSize+g, false)))
			dead = append(dead, asl.Untagged(uniqBytes(uint64(1000*g+599), 3*MinChunkSize+g, false)))
		}
		// Interleave live and dead in the same batches, so packs mix them.
		arts := append(append([]asl.Artifact{}, live...), dead...)
		refs, err := s.PutBatch(ctx, asl.HashSHA256, arts)
		if err != nil {
			t.Fatal(err)
		}
		liveRefs := append([]asl.Reference{sharedRef}, refs[:len(live)]...)
		for i, a := range live {
			w.reach[refs[i]] = a
		}
		for i, a := range dead {
			w.unreach[refs[len(live)+i]] = a
		}
		mid := listArt(liveRefs[len(liveRefs)/2:]...)
		midRef := put(t, s, asl.HashSHA256, mid)
		w.reach[midRef] = mid
		top := listArt(append(liveRefs[:len(liveRefs)/2], midRef)...)
		topRef := put(t, s, asl.HashSHA256, top)
		w.reach[topRef] = top
		if err := s.Pin(ctx, fmt.Sprintf("group/%03d", g), topRef, asl.PinOptions{}); err != nil {
			t.Fatal(err)
		}
		deadTop := listArt(append(refs[len(live):], sharedRef)...)
		deadRef := put(t, s, asl.HashSHA256, deadTop)
		w.unreach[deadRef] = deadTop
		// Index entries: one naming a live artifact, one a dead one.
		_, err = s.PutIndexed(ctx, asl.HashSHA256, nil, []asl.IndexEntry{
			{Space: testSpace, Key: []byte(fmt.Sprintf("live %d", g)), Value: topRef.Bytes()},
			{Space: testSpace, Key: []byte(fmt.Sprintf("dead %d", g)), Value: deadRef.Bytes()},
		})
		if err != nil {
			t.Fatal(err)
		}
		w.entries++
	}
	return w
}

// uniqBytes is genBytes made unique by its seed (compressible genBytes of
// equal length may be equal).
func uniqBytes(seed uint64, n int, compressible bool) []byte {
	b := genBytes(seed, n, compressible)
	copy(b, fmt.Sprintf("%d:", seed))
	return b
}

// checkWorld: every reachable artifact reads back intact, no unreachable
// one is stored (when gone), everything stored verifies.
func checkWorld(t testing.TB, s *Store, w *gcWorld, gone bool) {
	t.Helper()
	ctx := context.Background()
	for ref, a := range w.reach {
		got, err := asl.Get(ctx, s, ref, 0)
		if err != nil {
			t.Fatalf("reachable %s: %v", ref, err)
		}
		if !sameArtifact(got, a) {
			t.Fatalf("reachable %s differs", ref)
		}
	}
	left := 0
	for ref := range w.unreach {
		if ok, err := asl.Has(ctx, s, ref); err != nil {
			t.Fatal(err)
		} else if ok {
			left++
		}
	}
	if gone && left != 0 {
		t.Fatalf("%d unreachable artifacts left", left)
	}
	err := s.Enumerate(ctx, asl.Reference{}, func(in asl.Info) error {
		rc, _, err := s.Fetch(ctx, in.Ref)
		if err != nil {
			return err
		}
		defer rc.Close()
		_, err = io.Copy(io.Discard, rc)
		return err
	})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
}

func TestGcDeletesUnreachable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name    string
		groups  int
		large   bool
		compact float64
	}{
		{"small artifacts", 8, false, 0},
		{"with large artifacts", 6, true, 0},
		{"no compaction", 4, true, -1},
		{"compact everything", 4, true, 1.01},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			o := Options{FS: fs, ChunkSize: MinChunkSize}
			s, err := Create("store", &o)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { s.Close() }()
			w := buildWorld(t, s, tc.groups, tc.large)
			opts := gcOpts(s)
			opts.CompactBelow = tc.compact
			dry := opts
			dry.DryRun = true
			rep, err := s.GC(ctx, dry)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Deleted != int64(len(w.unreach)) || rep.Entries[testSpace] != w.entries {
				t.Fatalf("dry run: %+v, want %d deleted, %d entries", rep, len(w.unreach), w.entries)
			}
			checkWorld(t, s, w, false)
			rep, err = s.GC(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("gc: %+v", rep)
			if rep.Deleted != int64(len(w.unreach)) || rep.Entries[testSpace] != w.entries || rep.KeptConcurrent != 0 {
				t.Fatalf("gc: %+v, want %d deleted, %d entries", rep, len(w.unreach), w.entries)
			}
			if tc.compact >= 0 && (rep.PacksDeleted == 0 || rep.PackBytes[1] >= rep.PackBytes[0]) {
				t.Fatalf("no space back: %+v", rep)
			}
			checkWorld(t, s, w, true)
			n := 0
			_ = s.ScanIndex(ctx, testSpace, nil, func(_, _ []byte) error { n++; return nil })
			if n != tc.groups {
				t.Fatalf("%d entries left, want %d", n, tc.groups)
			}
			// A second collection finds nothing to do.
			rep, err = s.GC(ctx, opts)
			if err != nil || rep.Deleted != 0 || len(rep.Entries) != 0 {
				t.Fatalf("second gc: %+v %v", rep, err)
			}
			// Reopen and rebuild from every pack record: nothing comes back.
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if s, err = Open("store", &o); err != nil {
				t.Fatal(err)
			}
			if _, err := s.recoverPacks(true); err != nil {
				t.Fatal(err)
			}
			checkWorld(t, s, w, true)
		})
	}
}

// TestGcCrash takes a crash clone of the store at the points where gc
// reaches a new durable state, then checks each clone: nothing reachable
// is lost, everything verifies, and a second gc finishes the job. The
// default run clones at the first point of each kind (marked, swept, a
// batch rewritten, a pack copied, ...); AMDUAT_LONG=1 at every point, and
// for each also a clone with half of the unsynced writes kept.
func TestGcCrash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := vfs.NewCrashableMem()
	o := Options{FS: fs, ChunkSize: MinChunkSize}
	s, err := Create("store", &o)
	if err != nil {
		t.Fatal(err)
	}
	w := buildWorld(t, s, 6, true)
	type clone struct {
		point string
		fs    *vfs.MemFS
	}
	var clones []clone
	opts := gcOpts(s)
	opts.SweepBatch = 7
	opts.compactBatch = 4 << 10
	npoints := 0
	kinds := map[string]bool{}
	opts.point = func(p string) {
		npoints++
		if kinds[p] && !longtest.Enabled() {
			return
		}
		kinds[p] = true
		for i, pct := range []int{0, 50} {
			if pct != 0 && !longtest.Enabled() {
				continue
			}
			c := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(uint64(len(clones)), uint64(i)))})
			clones = append(clones, clone{fmt.Sprintf("%s (%d%% unsynced)", p, pct), c})
		}
	}
	rep, err := s.GC(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	points := map[string]int{}
	for _, c := range clones {
		t.Run(c.point, func(t *testing.T) {
			s, err := Open("store", &Options{FS: c.fs, ChunkSize: MinChunkSize})
			if err != nil {
				t.Fatalf("open after crash: %v", err)
			}
			defer func() { s.Close() }()
			checkWorld(t, s, w, false)
			again := gcOpts(s)
			again.compactBatch = opts.compactBatch
			if _, err := s.GC(ctx, again); err != nil {
				t.Fatalf("second gc: %v", err)
			}
			checkWorld(t, s, w, true)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if s, err = Open("store", &Options{FS: c.fs, ChunkSize: MinChunkSize}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.recoverPacks(true); err != nil {
				t.Fatal(err)
			}
			checkWorld(t, s, w, true)
		})
		points[c.point]++
	}
	t.Logf("gc crash test: %d crash clones at %d points of %d kinds (%d deleted, %d packs removed in the run; %s=1 clones at every point)", len(clones), npoints, len(kinds), rep.Deleted, rep.PacksDeleted, longtest.Env)
	if npoints < 10 || len(kinds) < 8 {
		t.Fatalf("only %d crash points of %d kinds", npoints, len(kinds))
	}
}

// TestGcConcurrentPuts puts, re-puts and reads while gc runs: every
// artifact put during the collection survives it, with the index entries
// written with it, and so does every artifact read.
func TestGcConcurrentPuts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t, &Options{ChunkSize: MinChunkSize})
	w := buildWorld(t, s, 10, true)
	var unreach []asl.Reference
	for r := range w.unreach {
		unreach = append(unreach, r)
	}
	opts := gcOpts(s)
	opts.SweepBatch = 3
	marked := make(chan struct{})
	var once sync.Once
	opts.point = func(p string) {
		if p == "marked" {
			once.Do(func() { close(marked) })
		}
	}
	done := make(chan struct{})
	var (
		mu      sync.Mutex
		kept    = map[asl.Reference]asl.Artifact{}
		puts    atomic.Int64
		reputs  atomic.Int64
		workers sync.WaitGroup
	)
	keep := func(r asl.Reference, a asl.Artifact) {
		mu.Lock()
		kept[r] = a
		mu.Unlock()
	}
	for wk := range 4 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			<-marked
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				a := asl.Untagged(uniqBytes(uint64(90000+wk*10000+i), 50+i%2000, true))
				switch i % 4 {
				case 0:
					r, err := asl.PutArtifact(ctx, s, asl.HashSHA256, a)
					if err != nil {
						t.Error(err)
						return
					}
					keep(r, a)
				case 1:
					b := asl.Untagged(uniqBytes(uint64(95000+wk*10000+i), 10, false))
					rs, err := s.PutIndexed(ctx, asl.HashSHA256, []asl.Artifact{a, b}, []asl.IndexEntry{{Space: testSpace, Key: []byte(fmt.Sprintf("run %d %d", wk, i)), Value: asl.MustDerive(asl.HashSHA256, a).Bytes()}})
					if err != nil {
						t.Error(err)
						return
					}
					keep(rs[0], a)
					keep(rs[1], b)
				case 2:
					// Re-put an unreachable artifact: it must survive.
					r := unreach[(wk*31+i)%len(unreach)]
					old := w.unreach[r]
					if _, err := asl.PutArtifact(ctx, s, asl.HashSHA256, old); err != nil {
						t.Error(err)
						return
					}
					reputs.Add(1)
					keep(r, old)
				case 3:
					big := asl.Untagged(uniqBytes(uint64(99000+wk*10000+i), 2*MinChunkSize+i, false))
					r, err := asl.PutArtifact(ctx, s, asl.HashSHA256, big)
					if err != nil {
						t.Error(err)
						return
					}
					keep(r, big)
				}
				puts.Add(1)
			}
		}()
	}
	rep, err := s.GC(ctx, opts)
	close(done)
	once.Do(func() { close(marked) })
	workers.Wait()
	if err != nil {
		t.Fatal(err)
	}
	lost := 0
	for r, a := range kept {
		got, err := asl.Get(ctx, s, r, 0)
		if err != nil || !sameArtifact(got, a) {
			lost++
			if !errors.Is(err, asl.ErrNotFound) {
				t.Errorf("%s: %v", r, err)
			}
		}
	}
	t.Logf("gc concurrency: %d puts (%d re-puts of unreachable artifacts) during gc, %d distinct artifacts put, %d lost; gc deleted %d, kept %d for concurrent use", puts.Load(), reputs.Load(), len(kept), lost, rep.Deleted, rep.KeptConcurrent)
	if lost != 0 {
		t.Fatalf("%d artifacts put during gc lost", lost)
	}
	if puts.Load() == 0 {
		t.Fatal("no put ran during gc")
	}
	checkWorld(t, s, &gcWorld{reach: w.reach}, false)
}

// A read-only open taken before a collection that removed a pack reports
// ErrStale for what it can no longer read, not damage.
func TestGcReadOnlyBesideIsStale(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := vfs.NewMem()
	o := Options{FS: fs, ChunkSize: MinChunkSize}
	s, err := Create("store", &o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := buildWorld(t, s, 4, false)
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	ro, err := Open("store", &Options{FS: fs, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	rep, err := s.GC(ctx, gcOpts(s))
	if err != nil || rep.PacksDeleted == 0 {
		t.Fatalf("gc: %+v %v", rep, err)
	}
	stale := 0
	for ref := range w.reach {
		_, err := asl.Get(ctx, ro, ref, 0)
		if err != nil && (!errors.Is(err, ErrStale) || errors.Is(err, asl.ErrIntegrity)) {
			t.Fatalf("read-only read after gc: %v", err)
		}
		if err != nil {
			stale++
		}
	}
	if stale == 0 {
		t.Fatal("the removed pack was never missed")
	}
}

// Everything is garbage: the only pack goes, an empty one takes its
// place (so that its id is never reused), and the store works on.
func TestGcEverythingGarbage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := vfs.NewMem()
	o := Options{FS: fs}
	s, err := Create("store", &o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	var refs []asl.Reference
	for i := range 50 {
		refs = append(refs, put(t, s, asl.HashSHA256, asl.Untagged(uniqBytes(uint64(i), 3000, false))))
	}
	rep, err := s.GC(ctx, gcOpts(s))
	if err != nil || rep.Deleted != 50 || rep.PacksDeleted != 1 || rep.PackBytes[1] != int64(len(packMagic)) {
		t.Fatalf("gc: %+v %v", rep, err)
	}
	a := asl.Untagged([]byte("after"))
	ref := put(t, s, asl.HashSHA256, a)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open("store", &o); err != nil {
		t.Fatal(err)
	}
	if _, err := s.recoverPacks(true); err != nil {
		t.Fatal(err)
	}
	checkWorld(t, s, &gcWorld{reach: map[asl.Reference]asl.Artifact{ref: a}, unreach: map[asl.Reference]asl.Artifact{refs[0]: {}}}, true)
}

// Damage to a reached artifact stops the collection before it deletes
// anything: what the damaged artifact reaches cannot be known.
func TestGcStopsAtDamage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := vfs.NewMem()
	s := newMemStore(t, &Options{FS: fs})
	w := buildWorld(t, s, 3, false)
	pins, err := s.Pins(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rec := indexOf(t, s, pins[1].Ref)
	path := packPath(s, rec.Pack)
	off := int64(rec.Offset) + int64(rec.Stored)
	orig := readFileRange(t, fs, path, off, off+1)
	patchFile(t, fs, path, off, []byte{orig[0] ^ 1})
	rep, err := s.GC(ctx, gcOpts(s))
	if !errors.Is(err, asl.ErrIntegrity) || rep.Deleted != 0 {
		t.Fatalf("gc over damage: %+v %v", rep, err)
	}
	patchFile(t, fs, path, off, orig)
	checkWorld(t, s, w, false)
	for ref := range w.unreach {
		if ok, _ := asl.Has(ctx, s, ref); !ok {
			t.Fatalf("%s deleted by a gc that met damage", ref)
		}
	}
}
