package surf_test

import (
	"context"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
)

// recordingStore records the index entries of each PutIndexed call.
type recordingStore struct {
	*memstore.Store
	calls [][]asl.IndexEntry
}

func (r *recordingStore) PutIndexed(ctx context.Context, id asl.HashID, arts []asl.Artifact, entries []asl.IndexEntry) ([]asl.Reference, error) {
	r.calls = append(r.calls, entries)
	return r.Store.PutIndexed(ctx, id, arts, entries)
}

func fakeClock(start time.Time, step time.Duration) func() time.Time {
	t := start
	return func() time.Time { t = t.Add(step); return t }
}

func TestRunLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, backend := range []string{"mem", "pebble"} {
		t.Run(backend, func(t *testing.T) {
			var store asl.Store
			var rec *recordingStore
			if backend == "mem" {
				rec = &recordingStore{Store: memstore.New()}
				store = rec
			} else {
				ps, err := pebblestore.Create(t.TempDir(), nil)
				if err != nil {
					t.Fatal(err)
				}
				defer ps.Close()
				store = ps
			}
			progArt, _ := pel.SeedArtifact("concat")
			prog, _ := asl.PutArtifact(ctx, store, asl.HashSHA256, progArt)
			a, _ := asl.PutArtifact(ctx, store, asl.HashSHA256, asl.Untagged([]byte("a")))
			clock := fakeClock(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC), time.Millisecond)
			req := surf.Request{ProgramRef: prog, InputRefs: []asl.Reference{a, a}}
			bad := surf.Request{ProgramRef: prog, InputRefs: []asl.Reference{a}}
			runs := []struct {
				req   surf.Request
				opts  surf.Options
				cache string
			}{
				{req, surf.Options{}, "miss"},
				{req, surf.Options{}, "hit"},
				{req, surf.Options{NoCache: true}, "off"},
				{bad, surf.Options{}, "miss"},
				{req, surf.Options{NoLog: true}, ""},
			}
			var results []*surf.Run
			for _, r := range runs {
				r.opts.Clock = clock
				run, err := surf.New(store, r.opts).Run(ctx, r.req)
				if err != nil {
					t.Fatal(err)
				}
				results = append(results, run)
			}
			if rec != nil {
				// An executed run's record is in the batch of its artifacts.
				first := rec.calls[0]
				found := false
				for _, e := range first {
					found = found || e.Space == surf.LogIndexSpace
				}
				if !found || len(first) < 3 {
					t.Fatalf("first run's batch lacks its log record: %v", first)
				}
			}
			ix := store.(asl.Indexer)
			var got []surf.LogRecord
			if _, err := surf.ReadLog(ctx, ix, surf.LogFilter{}, func(r surf.LogRecord) error { got = append(got, r); return nil }, nil); err != nil {
				t.Fatal(err)
			}
			if len(got) != 4 {
				t.Fatalf("%d records, want 4", len(got))
			}
			for i, r := range got {
				if r.Seq != uint64(i+1) || r.Cache != runs[i].cache || r.ResultRef != results[i].ResultRef || r.ProgramRef != prog ||
					r.Status != results[i].Result.Value.Status || r.Duration <= 0 || (i > 0 && !r.Time.After(got[i-1].Time)) {
					t.Fatalf("record %d: %+v", i, r)
				}
			}
			if got[3].Status != pel.StatusInvalidInputs || got[3].StatusCode != 3 {
				t.Fatalf("failed run record %+v", got[3])
			}
			// Filters.
			var n int
			surf.ReadLog(ctx, ix, surf.LogFilter{Since: 2}, func(r surf.LogRecord) error { n++; return nil }, nil)
			if n != 2 {
				t.Fatalf("since 2: %d records", n)
			}
			n = 0
			surf.ReadLog(ctx, ix, surf.LogFilter{HasStatus: true, Status: pel.StatusOK}, func(r surf.LogRecord) error { n++; return nil }, nil)
			if n != 3 {
				t.Fatalf("status OK: %d records", n)
			}
			// Following: records after a position, numbered on.
			pos, _ := surf.ReadLog(ctx, ix, surf.LogFilter{}, func(surf.LogRecord) error { return nil }, nil)
			run, err := surf.New(store, surf.Options{Clock: clock}).Run(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			var after []surf.LogRecord
			pos2, err := surf.ReadLogAfter(ctx, ix, pos, clock(), surf.LogFilter{}, func(r surf.LogRecord) error { after = append(after, r); return nil })
			if err != nil || len(after) != 1 || after[0].Seq != 5 || after[0].ResultRef != run.ResultRef || pos2.Seq != 5 {
				t.Fatalf("after: %+v %v", after, err)
			}
		})
	}
}

func TestLogRecordRoundTrip(t *testing.T) {
	t.Parallel()
	rec := surf.LogRecord{Time: time.Unix(1700000000, 123).UTC(), ResultRef: asl.MustDerive(asl.HashSHA256, asl.Untagged(nil)),
		ProgramRef: asl.MustDerive(asl.HashBLAKE3, asl.Untagged(nil)), Status: pel.StatusRuntimeFailed, StatusCode: 0x30001, Cache: "off", Duration: time.Second}
	rec.RequestKey[0] = 7
	e, err := surf.LogEntry(rec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := surf.DecodeLogRecord(e.Key, e.Value)
	if err != nil || got != rec {
		t.Fatalf("got %+v, %v", got, err)
	}
	if _, err := surf.DecodeLogRecord(append([]byte{1}, e.Key[1:]...), e.Value); err == nil {
		t.Fatal("key disagreeing with the value accepted")
	}
}

func FuzzDecodeLogRecord(f *testing.F) {
	rec := surf.LogRecord{Time: time.Unix(1700000000, 0), ResultRef: asl.MustDerive(asl.HashSHA256, asl.Untagged(nil)),
		ProgramRef: asl.MustDerive(asl.HashSHA256, asl.Untagged(nil)), Cache: "hit"}
	e, _ := surf.LogEntry(rec)
	f.Add(e.Key, e.Value)
	f.Add([]byte{}, []byte{0xa0})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		r, err := surf.DecodeLogRecord(key, value)
		if err != nil {
			return
		}
		e, err := surf.LogEntry(r)
		if err != nil {
			t.Fatal(err)
		}
		if string(e.Key) != string(key) || string(e.Value) != string(value) {
			t.Fatal("accepted record re-encodes differently")
		}
	})
}

// A record whose result is gone is reported as stale; the others are not.
func TestStaleLogKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := memstore.New()
	progArt, _ := pel.SeedArtifact("const")
	prog, _ := asl.PutArtifact(ctx, s, asl.HashSHA256, progArt)
	run, err := surf.New(s, surf.Options{}).Run(ctx, surf.Request{ProgramRef: prog})
	if err != nil {
		t.Fatal(err)
	}
	gone := surf.LogRecord{Time: time.Unix(1, 0), ResultRef: asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("gone"))), ProgramRef: prog, Cache: "miss"}
	e, _ := surf.LogEntry(gone)
	if _, err := s.PutIndexed(ctx, asl.HashSHA256, nil, []asl.IndexEntry{e}); err != nil {
		t.Fatal(err)
	}
	var stale []asl.Reference
	if err := surf.StaleLogKeys(ctx, s, s, func(_ []byte, r surf.LogRecord) error { stale = append(stale, r.ResultRef); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(stale) != 1 || stale[0] != gone.ResultRef || stale[0] == run.ResultRef {
		t.Fatalf("stale %v", stale)
	}
}
