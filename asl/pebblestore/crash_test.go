package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/internal/longtest"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

const crashChunk = 64 << 10

// verifyClone opens a crash clone and checks that every acknowledged
// artifact is intact, that everything visible verifies, and that no staged
// blob survived Open.
func verifyClone(t *testing.T, clone *vfs.MemFS, acked map[asl.Reference]asl.Artifact) *Store {
	t.Helper()
	s, err := Open("store", &Options{FS: clone, ChunkSize: crashChunk, IngestMin: 2 * crashChunk})
	if err != nil {
		t.Fatalf("Open crash clone: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	for ref, a := range acked {
		got, err := asl.Get(ctx, s, ref, 0)
		if err != nil {
			t.Fatalf("acknowledged %s after crash: %v", ref, err)
		}
		if !sameArtifact(got, a) {
			t.Fatalf("acknowledged %s differs after crash", ref)
		}
	}
	err = s.Enumerate(ctx, asl.Reference{}, func(info asl.Info) error {
		rc, _, err := s.Fetch(ctx, info.Ref)
		if err != nil {
			return err
		}
		defer rc.Close()
		_, err = io.Copy(io.Discard, rc)
		return err
	})
	if err != nil {
		t.Fatalf("visible artifact after crash: %v", err)
	}
	checkNoOrphans(t, s)
	return s
}

// crashModes run the crash tests with every payload in pack files (the
// default layout), and in the version 2 layout (PackMin < 0) with large
// artifacts staged in batches and with them ingested as SSTables.
var crashModes = []struct {
	name      string
	ingestMin int64
	packMin   int64
}{{"batched", -1, -1}, {"ingested", 2 * crashChunk, -1}, {"packed", 2 * crashChunk, 0}}

// TestCrashAcknowledgedPutsSurvive: puts and batches run while the
// filesystem is crash-cloned; every put acknowledged before the clone
// reads back intact from it. 12 puts run before the clone and 12 more
// beside it by default, 28 with AMDUAT_LONG=1 (internal/longtest; the
// clone is taken after the fifth of them; issue 25).
func TestCrashAcknowledgedPutsSurvive(t *testing.T) {
	t.Parallel()
	for i, mode := range crashModes {
		t.Run(mode.name, func(t *testing.T) { testCrashAcknowledgedPutsSurvive(t, mode.ingestMin, mode.packMin, i == 0) })
	}
}

// skipPartialCrash skips a crash subtest unless AMDUAT_LONG=1
// (internal/longtest) or it keeps all of the unsynced data, or none of it
// in the first of crashModes: the default run keeps the extremes of what
// the random partial choices exercise, all of it (the most a recovery must
// clean up) in every mode and none in one (issue 25).
func skipPartialCrash(t *testing.T, pct int, first bool) {
	t.Helper()
	if longtest.Enabled() || pct == 100 || pct == 0 && first {
		return
	}
	t.Skipf("unsynced data kept %d%%: %s=1 runs it", pct, longtest.Env)
}

func testCrashAcknowledgedPutsSurvive(t *testing.T, ingestMin, packMin int64, first bool) {
	for round, pct := range []int{0, 30, 70, 100} {
		t.Run(fmt.Sprintf("unsynced %d%%", pct), func(t *testing.T) {
			skipPartialCrash(t, pct, first)
			fs := vfs.NewCrashableMem()
			s, err := Create("store", &Options{FS: fs, ChunkSize: crashChunk, IngestMin: ingestMin, PackMin: packMin})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			var mu sync.Mutex
			acked := map[asl.Reference]asl.Artifact{}
			ack := func(refs []asl.Reference, arts []asl.Artifact) {
				mu.Lock()
				defer mu.Unlock()
				for i, r := range refs {
					acked[r] = arts[i]
				}
			}
			seed := uint64(round * 1000)
			artifact := func(i int) asl.Artifact {
				switch i % 4 {
				case 0:
					return asl.Untagged([]byte(fmt.Sprintf("small %d/%d", round, i)))
				case 1:
					return asl.Tagged(asl.TypeTag(i), genBytes(seed+uint64(i), 30<<10, i%8 == 1))
				case 2:
					return asl.Untagged(genBytes(seed+uint64(i), 3*crashChunk+i, i%8 == 2))
				default:
					return asl.Untagged(genBytes(seed+uint64(i), 100+i, false))
				}
			}
			work := func(i int) error {
				if i%3 == 0 {
					arts := []asl.Artifact{artifact(i), artifact(i + 1), artifact(i + 2), artifact(i)}
					refs, err := s.PutBatch(ctx, asl.HashSHA256, arts)
					if err == nil {
						ack(refs, arts)
					}
					return err
				}
				a := artifact(i)
				ref, err := asl.PutArtifact(ctx, s, asl.HashBLAKE3, a)
				if err == nil {
					ack([]asl.Reference{ref}, []asl.Artifact{a})
				}
				return err
			}
			for i := range 12 {
				if err := work(i); err != nil {
					t.Fatal(err)
				}
			}
			// More work runs while the filesystem is crash-cloned.
			progress := make(chan int, 100)
			done := make(chan error, 1)
			go func() {
				for i := 12; i < 12+longtest.Count(12, 28); i++ {
					if err := work(i); err != nil {
						done <- err
						return
					}
					progress <- i
				}
				done <- nil
			}()
			for range 5 {
				<-progress
			}
			mu.Lock()
			snapshot := make(map[asl.Reference]asl.Artifact, len(acked))
			for r, a := range acked {
				snapshot[r] = a
			}
			mu.Unlock()
			clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(uint64(pct), 7))})
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			verifyClone(t, clone, snapshot)
		})
	}
}

// gateReader pauses after n bytes until resumed.
type gateReader struct {
	r       io.Reader
	n       int
	reached chan struct{}
	resume  chan struct{}
	once    sync.Once
}

func (g *gateReader) Read(p []byte) (int, error) {
	if g.n <= 0 {
		g.once.Do(func() {
			close(g.reached)
			<-g.resume
		})
	} else if len(p) > g.n {
		p = p[:g.n]
	}
	n, err := g.r.Read(p)
	g.n -= n
	return n, err
}

// midChunk is the chunk size of TestCrashMidStreamLeavesNothingVisible's
// store: its streams count in chunks (staging batches of 4, a cut after
// 20 of 40), and chunks of a quarter of crashChunk put, hash and re-put a
// quarter of the bytes (issue 25). Its artifacts stay above the crash
// modes' ingestion threshold (2 crashChunks), so they take the same paths.
const midChunk = crashChunk / 4

// TestCrashMidStreamLeavesNothingVisible: a streamed put cut by a crash
// after its first staging batches (or pack parts) leaves nothing visible in
// the crash clone, and the clone takes the same put again.
func TestCrashMidStreamLeavesNothingVisible(t *testing.T) {
	t.Parallel()
	for i, mode := range crashModes {
		t.Run(mode.name, func(t *testing.T) { testCrashMidStreamLeavesNothingVisible(t, mode.ingestMin, mode.packMin, i == 0) })
	}
}

func testCrashMidStreamLeavesNothingVisible(t *testing.T, ingestMin, packMin int64, first bool) {
	for _, pct := range []int{0, 50, 100} {
		t.Run(fmt.Sprintf("unsynced %d%%", pct), func(t *testing.T) {
			skipPartialCrash(t, pct, first)
			fs := vfs.NewCrashableMem()
			s, err := Create("store", &Options{FS: fs, ChunkSize: midChunk, IngestMin: ingestMin, PackMin: packMin})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			s.stageBytes = 4 * midChunk
			ctx := context.Background()
			before := asl.Untagged(genBytes(200, 12*midChunk, false))
			beforeRef := put(t, s, asl.HashSHA256, before)
			packedBefore := packDirBytes(t, s)

			size := uint64(40 * midChunk)
			big := genBytes(201, int(size), false)
			g := &gateReader{r: bytes.NewReader(big), n: int(size / 2), reached: make(chan struct{}), resume: make(chan struct{})}
			type result struct {
				ref asl.Reference
				err error
			}
			res := make(chan result, 1)
			go func() {
				ref, err := s.Put(ctx, asl.HashSHA256, asl.Header{Size: size}, g)
				res <- result{ref, err}
			}()
			<-g.reached
			// Let the writer commit at least one staging batch (or, packed,
			// write its first parts).
			staged := func() bool {
				if packMin >= 0 {
					return packDirBytes(t, s) > packedBefore+2*midChunk
				}
				return len(rawKeys(t, s, prefixStaging)) > 0
			}
			for deadline := time.Now().Add(time.Minute); !staged() && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			if pct == 100 && packMin < 0 {
				// A staging batch is committed without sync: it is
				// visible above as soon as it is in the memtable, but
				// Pebble's log writer writes it to the file later, from
				// its own goroutine. Bytes still in the process are lost
				// in any crash, so the clone below could miss the batch
				// although it keeps every unsynced byte of the files (seen
				// under load in CI). A synced log record waits for every
				// record before it to reach the file; with all unsynced
				// data kept, the sync itself changes nothing in the clone.
				if err := s.db.LogData([]byte("crash test barrier"), pebble.Sync); err != nil {
					t.Fatal(err)
				}
			}
			clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(uint64(pct), 9))})
			close(g.resume)
			r := <-res
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.ref != asl.MustDerive(asl.HashSHA256, asl.Untagged(big)) {
				t.Fatal("wrong ref")
			}

			cs := verifyClone(t, clone, map[asl.Reference]asl.Artifact{beforeRef: before})
			if _, err := cs.Stat(ctx, r.ref); !errors.Is(err, asl.ErrNotFound) {
				t.Fatalf("half-written artifact after crash: Stat = %v", err)
			}
			if pct == 100 && packMin < 0 && cs.recovered == 0 {
				t.Fatal("no staged blob was cleaned although all unsynced data survived")
			}
			// The store keeps working: the same artifact can be put again.
			if ref := put(t, cs, asl.HashSHA256, asl.Untagged(big)); ref != r.ref {
				t.Fatal("re-put after crash gave another ref")
			}
			checkNoOrphans(t, cs)
		})
	}
}
