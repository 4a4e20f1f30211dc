package s3store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/s3store"
	"github.com/amduat/amduat/asl/s3store/miniotest"
	"github.com/amduat/amduat/internal/longtest"
)

// tagList is this test's own artifact kind that holds references: its
// payload is a sequence of ReferenceBytes, each one of its children.
const tagList asl.TypeTag = 0x7e57

// childrenOf decodes a tagList artifact through the store.
func childrenOf(s asl.Store) s3store.ChildrenFunc {
	return func(ctx context.Context, in asl.Info) ([]asl.Reference, error) {
		if !in.HasTag || in.Tag != tagList {
			return nil, nil
		}
		a, err := asl.Get(ctx, s, in.Ref, 1<<20)
		if err != nil {
			return nil, err
		}
		var out []asl.Reference
		for b := a.Bytes; len(b) > 0; {
			r, err := asl.DecodeReference(b[:34])
			if err != nil {
				return nil, err
			}
			out = append(out, r)
			b = b[34:]
		}
		return out, nil
	}
}

func list(refs []asl.Reference) asl.Artifact {
	var b []byte
	for _, r := range refs {
		b = append(b, r.Bytes()...)
	}
	return asl.Artifact{Bytes: b, HasTag: true, Tag: tagList}
}

// openSame opens a second store on st's bucket and prefix (another
// server).
func openSame(t *testing.T, m *miniotest.Server, st *s3store.Store, o s3store.Options) *s3store.Store {
	t.Helper()
	s2, err := s3store.Open(t.Context(), st.Bucket(), st.Prefix(), o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s2.Close() })
	s2.SetChildren(childrenOf(s2))
	return s2
}

func put(t *testing.T, s asl.Store, a asl.Artifact) asl.Reference {
	t.Helper()
	ref, err := asl.PutArtifact(t.Context(), s, asl.HashSHA256, a)
	if err != nil {
		t.Fatalf("put: %v", err)
	}
	return ref
}

func TestPins(t *testing.T) {
	t.Parallel()
	m := sharedServer(t)
	ctx := asl.WithActor(t.Context(), "tester")
	st := create(t, m, "pins", options(m))
	a := put(t, st, asl.Artifact{Bytes: []byte("a")})
	b := put(t, st, asl.Artifact{Bytes: []byte("b")})
	missing := asl.MustParseReference("0001" + fmt.Sprintf("%064x", 7))
	if err := st.Pin(ctx, "x", missing, asl.PinOptions{}); !errors.Is(err, asl.ErrNotFound) {
		t.Fatalf("pin of a missing artifact = %v, want ErrNotFound", err)
	}
	if err := st.Pin(ctx, "", a, asl.PinOptions{}); err == nil {
		t.Fatal("empty pin name accepted")
	}
	for _, step := range []struct {
		name  string
		ref   asl.Reference
		force bool
		want  error
	}{
		{"rel/1.0", a, false, nil},
		{"rel/1.0", a, false, nil}, // same: no change
		{"rel/1.0", b, false, asl.ErrPinExists},
		{"rel/1.0", b, true, nil},
		{"a b", a, false, nil},
	} {
		if err := st.Pin(ctx, step.name, step.ref, asl.PinOptions{Force: step.force}); !errors.Is(err, step.want) {
			t.Fatalf("Pin(%q, %s, force %v) = %v, want %v", step.name, step.ref, step.force, err, step.want)
		}
	}
	pins, err := st.Pins(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(pins) != fmt.Sprint([]asl.Pin{{Name: "a b", Ref: a}, {Name: "rel/1.0", Ref: b}}) {
		t.Fatalf("Pins = %v", pins)
	}
	if ok, err := st.Unpin(ctx, "a b"); !ok || err != nil {
		t.Fatalf("Unpin = %v, %v", ok, err)
	}
	if ok, err := st.Unpin(ctx, "a b"); ok || err != nil {
		t.Fatalf("second Unpin = %v, %v", ok, err)
	}
	log, err := st.PinLog(ctx, "rel/1.0")
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 2 || log[0].Seq != 1 || log[0].New != a || !log[0].Old.IsZero() || log[1].Old != a || log[1].New != b || log[1].Actor != "tester" {
		t.Fatalf("PinLog(rel/1.0) = %+v", log)
	}
	all, err := st.PinLog(ctx, "")
	if err != nil || len(all) != 4 {
		t.Fatalf("PinLog() = %+v, %v; want 4 changes", all, err)
	}
	// The pins are the bucket's: another server sees them.
	s2 := openSame(t, m, st, options(m))
	if p2, err := s2.Pins(ctx); err != nil || fmt.Sprint(p2) != fmt.Sprint(pins[1:]) {
		t.Fatalf("Pins from a second server = %v, %v", p2, err)
	}
}

// TestPinsWithPrefix: a prefix listing returns exactly the live pins whose
// names begin with the prefix, in name order, escaped bytes and unpinned
// names included in the cases.
func TestPinsWithPrefix(t *testing.T) {
	m := sharedServer(t)
	ctx := t.Context()
	st := create(t, m, "pinprefix", options(m))
	a := put(t, st, asl.Artifact{Bytes: []byte("a")})
	names := []string{"plan/e/000000000002", "plan/e/000000000001", "plan/e2/000000000001", "plan/claim/x y/1", "plan-other", "plan/gone"}
	for _, n := range names {
		if err := st.Pin(ctx, n, a, asl.PinOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Unpin(ctx, "plan/gone"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		prefix string
		want   []string
	}{
		{"plan/e/", []string{"plan/e/000000000001", "plan/e/000000000002"}},
		{"plan/", []string{"plan/claim/x y/1", "plan/e/000000000001", "plan/e/000000000002", "plan/e2/000000000001"}},
		{"plan/claim/x ", []string{"plan/claim/x y/1"}},
		{"plan/gone", nil},
		{"zzz", nil},
	} {
		pins, err := st.PinsWithPrefix(ctx, c.prefix)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range pins {
			got = append(got, p.Name)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("PinsWithPrefix(%q) = %q, want %q", c.prefix, got, c.want)
		}
	}
}

// TestPinRace: servers re-pointing one name at once, each without Force
// once and with Force after: exactly one first pin wins, and the log has
// every change, numbered 1..n with no gap, each Old the previous New.
func TestPinRace(t *testing.T) {
	t.Parallel()
	m := sharedServer(t)
	ctx := t.Context()
	st := create(t, m, "pins", options(m))
	const n = 6
	refs := make([]asl.Reference, n)
	stores := make([]*s3store.Store, n)
	for i := range n {
		refs[i] = put(t, st, asl.Artifact{Bytes: []byte{byte(i)}})
		stores[i] = openSame(t, m, st, options(m))
	}
	var wins atomic.Int32
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := stores[i].Pin(ctx, "race", refs[i], asl.PinOptions{})
			switch {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, asl.ErrPinExists):
				errs[i] = err
				return
			}
			errs[i] = stores[i].Pin(ctx, "race", refs[i], asl.PinOptions{Force: true})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if wins.Load() != 1 {
		t.Fatalf("%d servers created the pin, want 1", wins.Load())
	}
	log, err := st.PinLog(ctx, "race")
	if err != nil {
		t.Fatal(err)
	}
	var prev asl.Reference
	for i, c := range log {
		if c.Seq != uint64(i+1) || c.Old != prev {
			t.Fatalf("change %d = %+v after %s", i, c, prev)
		}
		prev = c.New
	}
	if len(log) < n {
		t.Fatalf("log has %d changes, want at least %d", len(log), n)
	}
	t.Logf("%d changes logged for %d servers", len(log), n)
}

func TestDelete(t *testing.T) {
	t.Parallel()
	m := sharedServer(t)
	ctx := t.Context()
	st := create(t, m, "delete", options(m))
	a := put(t, st, asl.Artifact{Bytes: []byte("a")})
	b := asl.MustParseReference("0001" + fmt.Sprintf("%064x", 9))
	got, err := st.Delete(ctx, []asl.Reference{a, b, a})
	if err != nil || fmt.Sprint(got) != "[true false false]" {
		t.Fatalf("Delete = %v, %v", got, err)
	}
	if _, _, err := st.Fetch(ctx, a); !errors.Is(err, asl.ErrNotFound) {
		t.Fatalf("Fetch after Delete = %v", err)
	}
}

// gcOptions: a collection that keeps nothing for its age, and writers
// that refresh every re-put, so that every race is exercised at once.
func gcStoreOptions(m *miniotest.Server) s3store.Options {
	o := options(m)
	o.TouchAge = -1
	return o
}

func TestGC(t *testing.T) {
	t.Parallel()
	m := sharedServer(t)
	ctx := t.Context()
	st := create(t, m, "gcgc", gcStoreOptions(m))
	st.SetChildren(childrenOf(st))
	leaf1 := put(t, st, asl.Artifact{Bytes: []byte("leaf 1")})
	leaf2 := put(t, st, asl.Artifact{Bytes: []byte("leaf 2")})
	root := put(t, st, list([]asl.Reference{leaf1}))
	junk := put(t, st, asl.Artifact{Bytes: []byte("junk")})
	if err := st.Pin(ctx, "root", root, asl.PinOptions{}); err != nil {
		t.Fatal(err)
	}
	waitListedClockPast(t, st)
	// The default grace keeps everything just written.
	rep, err := st.GC(ctx, s3store.GCOptions{})
	if err != nil || rep.Deleted != 0 || rep.Young != 2 || rep.Reachable != 2 {
		t.Fatalf("GC (default grace) = %+v, %v", rep, err)
	}
	rep, err = st.GC(ctx, s3store.GCOptions{Grace: -1, DryRun: true})
	if err != nil || rep.Deleted != 2 {
		t.Fatalf("GC dry run = %+v, %v", rep, err)
	}
	rep, err = st.GC(ctx, s3store.GCOptions{Grace: -1})
	if err != nil || rep.Deleted != 2 || rep.Gen != 2 {
		t.Fatalf("GC = %+v, %v", rep, err)
	}
	for ref, want := range map[asl.Reference]error{leaf1: nil, root: nil, leaf2: asl.ErrNotFound, junk: asl.ErrNotFound} {
		if _, err := st.Stat(ctx, ref); !errors.Is(err, want) {
			t.Errorf("Stat(%s) after GC = %v, want %v", ref, err, want)
		}
	}
	// A second collection at once is refused; a re-put of an artifact the
	// running collection condemned (unpinned, older than the grace) keeps
	// it: the writer claims its shard. The re-put comes once the
	// collection has listed its candidates (BeforeSweep): a re-put before
	// the listing refreshes the object, which is then listed as young and
	// kept without a claim.
	again := put(t, st, asl.Artifact{Bytes: []byte("again")})
	waitListedClockPast(t, st)
	started := make(chan struct{})
	listed := make(chan struct{})
	release := make(chan struct{})
	type result struct {
		rep s3store.GCReport
		err error
	}
	done := make(chan result)
	go func() {
		rep, err := st.GC(ctx, s3store.GCOptions{Grace: -1, Started: func() { close(started) }, BeforeSweep: func() { close(listed); <-release }})
		done <- result{rep, err}
	}()
	<-started
	s2 := openSame(t, m, st, gcStoreOptions(m))
	if _, err := s2.GC(ctx, s3store.GCOptions{Grace: -1}); !errors.Is(err, s3store.ErrGCRunning) {
		t.Errorf("concurrent GC = %v, want ErrGCRunning", err)
	}
	select {
	case <-listed:
	case r := <-done:
		t.Fatalf("GC ended before it listed its candidates: %+v, %v", r.rep, r.err)
	}
	if ref := put(t, s2, asl.Artifact{Bytes: []byte("again")}); ref != again {
		t.Fatal("re-put gave another reference")
	}
	close(release)
	r := <-done
	if r.err != nil || r.rep.KeptShards != 1 || r.rep.Kept != 1 {
		t.Fatalf("GC during a re-put = %+v, %v; want one shard kept", r.rep, r.err)
	}
	if _, err := st.Stat(ctx, again); err != nil {
		t.Fatalf("re-put artifact after GC: %v", err)
	}
	sd := openSame(t, m, st, options(m))
	if _, err := sd.GC(ctx, s3store.GCOptions{Grace: time.Minute}); err == nil {
		t.Fatal("a grace shorter than the touch age accepted")
	}
}

// TestGCPinAfterCollection: a collection with no grace removes an
// artifact nobody pinned yet and records the removal in its claim; a pin
// made afterwards of a list naming it finds the record and fails
// (asl.ErrNotFound), leaving the name unpinned; once the artifact is put
// again the same pin succeeds, although the list also names an artifact
// never stored (no record names it: it contributes nothing, SPECS.md
// §19.6).
func TestGCPinAfterCollection(t *testing.T) {
	t.Parallel()
	m := sharedServer(t)
	ctx := t.Context()
	st := create(t, m, "gcrecord", gcStoreOptions(m))
	st.SetChildren(childrenOf(st))
	leafArt := asl.Artifact{Bytes: []byte("put before a collection, pinned after it")}
	leaf := put(t, st, leafArt)
	waitListedClockPast(t, st)
	rep, err := st.GC(ctx, s3store.GCOptions{Grace: -1})
	if err != nil || rep.Deleted != 1 {
		t.Fatalf("GC = %+v, %v; want the leaf deleted", rep, err)
	}
	claim := st.Prefix() + "gc/claims/" + fmt.Sprint(rep.Gen) + "/" + leaf.String()[4:6]
	if got, want := string(getObject(t, st, claim)), "swept\n"+leaf.String()+"\n"; got != want {
		t.Fatalf("claim %s = %q, want the deletion record %q", claim, got, want)
	}
	never := asl.MustParseReference("0001" + fmt.Sprintf("%064x", 0x5eed))
	root := put(t, st, list([]asl.Reference{leaf, never}))
	if err := st.Pin(ctx, "late", root, asl.PinOptions{}); !errors.Is(err, asl.ErrNotFound) || !strings.Contains(err.Error(), leaf.String()) {
		t.Fatalf("pin after the leaf was collected = %v, want ErrNotFound naming %s", err, leaf)
	}
	if pins, err := st.Pins(ctx); err != nil || len(pins) != 0 {
		t.Fatalf("pins after a failed pin = %v, %v; want none", pins, err)
	}
	put(t, st, leafArt)
	if err := st.Pin(ctx, "late", root, asl.PinOptions{}); err != nil {
		t.Fatalf("pin after putting the leaf again: %v", err)
	}
	if rep, err := st.GC(ctx, s3store.GCOptions{Grace: -1}); err != nil || rep.Deleted != 0 || rep.Reachable != 2 {
		t.Fatalf("GC of the pinned list = %+v, %v", rep, err)
	}
}

// TestGCConcurrentWriters: two servers put, re-put and pin on one bucket
// while a third collects over and over with no grace; every reference a
// writer got back and then pinned (or that a pinned list reaches) must
// still be there at the end. A pin that finds part of its closure already
// collected fails (asl.ErrNotFound): the writer puts again and pins again,
// and that is counted, not lost. Each writer does 3 rounds by default
// (the third drops an older pin), 20 with AMDUAT_LONG=1
// (internal/longtest): the collector collects for as long as the writers
// write, which made this the package's costliest test in CPU seconds
// (issue 25).
func TestGCConcurrentWriters(t *testing.T) {
	t.Parallel()
	m := sharedServer(t)
	ctx := t.Context()
	base := create(t, m, "gcrace", gcStoreOptions(m))
	collector := openSame(t, m, base, gcStoreOptions(m))
	const writers = 2
	rounds := longtest.Logf(t, "rounds per writer", 3, 20)
	type kept struct {
		name string
		refs []asl.Reference // the pinned list first
	}
	var (
		mu       sync.Mutex
		held     []kept
		repins   atomic.Int64
		reputs   atomic.Int64
		wg       sync.WaitGroup
		writing  atomic.Int32
		werrs    = make([]error, writers)
		shared   = 8 // artifacts every writer re-puts, pinned or not
		sharedOf = func(i int) asl.Artifact { return asl.Artifact{Bytes: []byte("shared " + fmt.Sprint(i%shared))} }
	)
	writing.Store(writers)
	for w := range writers {
		s := openSame(t, m, base, gcStoreOptions(m))
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer writing.Add(-1)
			werrs[w] = func() error {
				var mine []kept
				for i := range rounds {
					arts := []asl.Artifact{
						{Bytes: []byte(fmt.Sprintf("writer %d round %d a", w, i))},
						{Bytes: []byte(fmt.Sprintf("writer %d round %d b", w, i))},
						sharedOf(i + w),
					}
					name := fmt.Sprintf("w%d/%d", w, i)
					for attempt := 0; ; attempt++ {
						refs, err := s.PutBatch(ctx, asl.HashSHA256, arts)
						if err != nil {
							return err
						}
						reputs.Add(1)
						root, err := asl.PutArtifact(ctx, s, asl.HashSHA256, list(refs))
						if err != nil {
							return err
						}
						err = s.Pin(ctx, name, root, asl.PinOptions{})
						if errors.Is(err, asl.ErrNotFound) {
							repins.Add(1)
							continue
						}
						if err != nil {
							return err
						}
						mine = append(mine, kept{name, append([]asl.Reference{root}, refs...)})
						break
					}
					// Garbage: an unpinned artifact, and every third
					// round an older pin dropped.
					if _, err := asl.PutArtifact(ctx, s, asl.HashSHA256, asl.Artifact{Bytes: []byte(fmt.Sprintf("junk %d %d", w, i))}); err != nil {
						return err
					}
					if i%3 == 2 {
						if _, err := s.Unpin(ctx, mine[0].name); err != nil {
							return err
						}
						mine = mine[1:]
					}
				}
				mu.Lock()
				held = append(held, mine...)
				mu.Unlock()
				return nil
			}()
		}()
	}
	var runs, during, deleted, keptShards int
	for {
		busy := writing.Load() > 0
		rep, err := collector.GC(ctx, s3store.GCOptions{Grace: -1})
		if err != nil {
			t.Fatalf("GC: %v", err)
		}
		runs++
		if busy {
			during++
		}
		deleted += rep.Deleted
		keptShards += rep.KeptShards
		if !busy {
			break
		}
	}
	wg.Wait()
	if err := errors.Join(werrs...); err != nil {
		t.Fatal(err)
	}
	lost, checked := 0, 0
	for _, k := range held {
		for _, r := range k.refs {
			checked++
			if _, err := asl.Get(ctx, base, r, 1<<20); err != nil {
				lost++
				t.Errorf("pin %s: %s: %v", k.name, r, err)
			}
		}
	}
	t.Logf("concurrent bucket gc: %d writers x %d rounds, %d collections (%d while writing), %d artifacts deleted, %d shards kept by writers, %d pins retried after a collection, %d batches put; %d acknowledged pinned references checked, %d lost",
		writers, rounds, runs, during, deleted, keptShards, repins.Load(), reputs.Load(), checked, lost)
	if deleted == 0 {
		t.Error("no collection deleted anything: the test did not race")
	}
}

// TestGCLease: a running collection rewrites its state within its lease;
// a state left running by a collection that died is taken over once its
// lease ran out, with the next generation.
func TestGCLease(t *testing.T) {
	t.Parallel()
	m := sharedServer(t)
	ctx := t.Context()
	o := gcStoreOptions(m)
	o.Lease = 400 * time.Millisecond
	st := create(t, m, "lease", o)
	stateKey := st.Prefix() + "gc/state"
	putObject(t, st, stateKey, []byte(`{"gen":7,"running":true,"id":"dead","grace_ns":0}`))
	refused := 0
	var rep s3store.GCReport
	var err error
	for {
		rep, err = st.GC(ctx, s3store.GCOptions{Grace: -1, BeforeSweep: func() {
			// Wait for the lease to be renewed: the state is rewritten.
			start := getObjectInfo(t, st, stateKey).LastModified
			for getObjectInfo(t, st, stateKey).LastModified.Equal(start) {
				time.Sleep(5 * time.Millisecond) // a poll, not a bound: at most a renewal's wait
			}
		}})
		if !errors.Is(err, s3store.ErrGCRunning) {
			break
		}
		refused++
	}
	t.Logf("refused %d times while the dead collection's lease ran", refused)
	if err != nil || rep.Gen != 8 {
		t.Fatalf("GC after a dead collection = %+v, %v (refused %d times)", rep, err, refused)
	}
	if b := string(getObject(t, st, stateKey)); !strings.Contains(b, `"gen":8,"running":false`) {
		t.Fatalf("state after GC = %s", b)
	}
}

// waitListedClockPast returns once an object written after it is sure to
// be listed with a modification time after every object written before
// it. A listing gives times to the millisecond, and a collection with no
// grace takes as candidates only objects listed strictly before its own
// state object (SPECS.md §6.7): without this, an artifact put in the same
// millisecond as the collection begins is young and kept. It waits on the
// object store's clock itself, not on a sleep: it rewrites a probe object
// outside the store's keys until the listing shows its time move on.
func waitListedClockPast(t *testing.T, st *s3store.Store) {
	t.Helper()
	key := st.Prefix() + "test/clock-probe"
	putObject(t, st, key, nil)
	first := getObjectInfo(t, st, key).LastModified
	for {
		putObject(t, st, key, nil)
		if getObjectInfo(t, st, key).LastModified.After(first) {
			return
		}
	}
}

func getObjectInfo(t *testing.T, st *s3store.Store, key string) minio.ObjectInfo {
	t.Helper()
	for obj := range st.Client().ListObjects(t.Context(), st.Bucket(), minio.ListObjectsOptions{Prefix: key}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		if obj.Key == key {
			return obj
		}
	}
	t.Fatalf("%s not listed", key)
	return minio.ObjectInfo{}
}
