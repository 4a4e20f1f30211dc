package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

func noChildren(context.Context, asl.Info) ([]asl.Reference, error) { return nil, nil }

func putSmall(t testing.TB, s *Store, text string) asl.Reference {
	t.Helper()
	refs, err := s.PutBatch(context.Background(), asl.HashSHA256, []asl.Artifact{asl.Untagged([]byte(text))})
	if err != nil {
		t.Fatal(err)
	}
	return refs[0]
}

// TestPinLog: every change of a pin is in its history, with the actor, in
// order; re-pointing needs Force; a no-op records nothing (SPECS.md §19.8).
func TestPinLog(t *testing.T) {
	t.Parallel()
	s := newMemStore(t, nil)
	ctx := asl.WithActor(context.Background(), "tester")
	a, b := putSmall(t, s, "a"), putSmall(t, s, "b")
	if err := s.Pin(ctx, "x", a, asl.PinOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Pin(ctx, "x", a, asl.PinOptions{}); err != nil {
		t.Fatalf("re-pin of the same reference: %v", err)
	}
	if err := s.Pin(ctx, "x", b, asl.PinOptions{}); !errors.Is(err, asl.ErrPinExists) {
		t.Fatalf("re-point without force: %v", err)
	}
	if err := s.Pin(ctx, "x", b, asl.PinOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.Pin(context.Background(), "y", a, asl.PinOptions{}); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Unpin(ctx, "x"); !ok || err != nil {
		t.Fatalf("unpin = %v, %v", ok, err)
	}
	if ok, err := s.Unpin(ctx, "x"); ok || err != nil {
		t.Fatalf("second unpin = %v, %v", ok, err)
	}
	if err := s.Pin(ctx, "z", asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("absent"))), asl.PinOptions{}); !errors.Is(err, asl.ErrNotFound) {
		t.Fatalf("pin of an absent artifact: %v", err)
	}
	log, err := s.PinLog(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	want := []asl.PinChange{{Seq: 1, Name: "x", New: a, Actor: "tester"}, {Seq: 2, Name: "x", Old: a, New: b, Actor: "tester"}, {Seq: 4, Name: "x", Old: b, Actor: "tester"}}
	if len(log) != len(want) {
		t.Fatalf("log = %+v", log)
	}
	for i, c := range log {
		if c.UnixNano <= 0 {
			t.Errorf("change %d has no time", i)
		}
		c.UnixNano = 0
		if c != want[i] {
			t.Errorf("change %d = %+v, want %+v", i, c, want[i])
		}
	}
	all, err := s.PinLog(ctx, "")
	if err != nil || len(all) != 4 || all[2].Name != "y" || all[2].Actor != "" {
		t.Fatalf("whole log = %+v, %v", all, err)
	}
}

// metaFixture fills a store with every kind of journal record: pins and
// their history, run log records, the cache salt, a deletion.
type metaFixture struct {
	pins    map[string]asl.Reference
	entries []asl.IndexEntry // metadata entries expected
	deleted asl.Reference
	history int
}

func writeMetaFixture(t testing.TB, s *Store) metaFixture {
	t.Helper()
	ctx := context.Background()
	f := metaFixture{pins: map[string]asl.Reference{}}
	a, b, c := putSmall(t, s, "pinned a"), putSmall(t, s, "pinned b"), putSmall(t, s, "pinned c")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Pin(ctx, "a", a, asl.PinOptions{}))
	must(s.Pin(ctx, "b", b, asl.PinOptions{}))
	must(s.Pin(ctx, "a", c, asl.PinOptions{Force: true}))
	_, err := s.Unpin(ctx, "b")
	must(err)
	must(s.Pin(ctx, "c", c, asl.PinOptions{}))
	f.pins["a"], f.pins["c"], f.history = c, c, 5
	salt := asl.IndexEntry{Space: "surf.config", Key: []byte("cache-salt"), Value: bytes.Repeat([]byte{9}, 32)}
	logRec := asl.IndexEntry{Space: "surf.log", Key: []byte("0001-run"), Value: []byte("record 1")}
	trimmed := asl.IndexEntry{Space: "surf.log", Key: []byte("0000-run"), Value: []byte("record 0")}
	_, err = s.PutIndexed(ctx, asl.HashSHA256, []asl.Artifact{asl.Untagged([]byte("result"))}, []asl.IndexEntry{salt, logRec, trimmed, {Space: "surf.trace", Key: []byte("k"), Value: []byte("v")}})
	must(err)
	must(s.DeleteIndex(ctx, "surf.log", [][]byte{trimmed.Key}))
	f.entries = append(f.entries, salt, logRec)
	f.deleted = putSmall(t, s, "deleted")
	if _, err := s.Delete(ctx, []asl.Reference{f.deleted}); err != nil {
		t.Fatal(err)
	}
	return f
}

// check holds s to f; it returns what differs.
func (f metaFixture) check(t testing.TB, s *Store) []string {
	t.Helper()
	ctx := context.Background()
	var bad []string
	pins, err := s.Pins(ctx)
	if err != nil {
		return []string{"pins: " + err.Error()}
	}
	got := map[string]asl.Reference{}
	for _, p := range pins {
		got[p.Name] = p.Ref
	}
	for n, r := range f.pins {
		if got[n] != r {
			bad = append(bad, "pin "+n+" lost or changed")
		}
	}
	if len(got) != len(f.pins) {
		bad = append(bad, "pins added")
	}
	for _, e := range f.entries {
		v, ok, err := s.LookupIndex(ctx, e.Space, e.Key)
		if err != nil || !ok || !bytes.Equal(v, e.Value) {
			bad = append(bad, "entry "+e.Space+"/"+string(e.Key)+" lost or changed")
		}
	}
	if _, ok, _ := s.LookupIndex(ctx, "surf.log", []byte("0000-run")); ok {
		bad = append(bad, "trimmed entry back")
	}
	if log, err := s.PinLog(ctx, ""); err != nil || len(log) != f.history {
		bad = append(bad, "pin history lost")
	}
	if _, err := s.Stat(ctx, f.deleted); !errors.Is(err, asl.ErrNotFound) {
		bad = append(bad, "deleted artifact back")
	}
	return bad
}

// dropMetaCopy removes Pebble's copy of the metadata (and brings back the
// index record of the deleted artifact), as a write-ahead log that lost
// its last batches would: only the journal still holds it.
func dropMetaCopy(t testing.TB, s *Store, deleted indexRecordAt) {
	t.Helper()
	b := s.db.NewBatch()
	for _, r := range [][2]byte{{prefixJournal, prefixJournal + 1}, {prefixPinLog, prefixPinLog + 1}, {prefixTomb, prefixTomb + 1}, {prefixIndexEntry, prefixIndexEntry + 1}} {
		_ = b.DeleteRange([]byte{r[0]}, []byte{r[1]}, nil)
	}
	_ = b.Set(deleted.key, deleted.val, nil)
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

type indexRecordAt struct{ key, val []byte }

func TestMetaReplayedIntoLostIndex(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	s, err := Create("store", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	f := writeMetaFixture(t, s)
	if bad := f.check(t, s); len(bad) > 0 {
		t.Fatalf("before: %v", bad)
	}
	// The deleted artifact's index record, as it was before the deletion.
	var saved indexRecordAt
	for _, e := range mustScanJournal(t, fs).recs {
		if e.rec.Kind == metaTomb {
			saved = indexRecordAt{appendIndexKey(nil, f.deleted), appendIndexRecord(nil, indexRecord{Size: 7, Stored: 7, Pack: e.rec.Pack, Offset: e.rec.Offset})}
		}
	}
	dropMetaCopy(t, s, saved)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{true, false, false} {
		s, err = Open("store", &Options{FS: fs, ReadOnly: ro})
		if err != nil {
			t.Fatal(err)
		}
		bad := f.check(t, s)
		if ro && len(bad) == 1 && bad[0] == "deleted artifact back" {
			// A read-only open writes nothing: the deletion the index lost
			// is applied by the next writable open (SPECS.md §6.4).
			bad = nil
		}
		if len(bad) > 0 {
			t.Errorf("read-only %v: %v (report %+v)", ro, bad, s.MetaReport())
		}
		s.Close()
	}
}

func mustScanJournal(t testing.TB, fs vfs.FS) journalScan {
	t.Helper()
	data, err := readWhole(fs, "store/"+journalName)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := scanJournal(data)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestJournalHealed: a damaged record, a torn tail, a missing journal: the
// index's copy stands, the journal is written anew from it, and nothing is
// lost.
func TestJournalHealed(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		harm func(b []byte) []byte
	}{
		{"damaged record", func(b []byte) []byte { b[len(b)/2] ^= 0x10; return b }},
		{"damaged last record", func(b []byte) []byte { b[len(b)-2] ^= 0x10; return b }},
		{"torn tail", func(b []byte) []byte { return append(b, 0, 0, 0, 9, 1, 2) }},
		{"damaged head", func(b []byte) []byte { b[3] ^= 1; return b }},
		{"missing", func([]byte) []byte { return nil }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			s, err := Create("store", &Options{FS: fs})
			if err != nil {
				t.Fatal(err)
			}
			f := writeMetaFixture(t, s)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			path := "store/" + journalName
			data, err := readWhole(fs, path)
			if err != nil {
				t.Fatal(err)
			}
			if b := c.harm(bytes.Clone(data)); b == nil {
				if err := fs.Remove(path); err != nil {
					t.Fatal(err)
				}
			} else {
				writeFile(t, fs, path, b)
			}
			s, err = Open("store", &Options{FS: fs})
			if err != nil {
				t.Fatal(err)
			}
			rep := s.MetaReport()
			if !rep.Healed || rep.Lost {
				t.Errorf("report %+v: want healed, nothing lost", rep)
			}
			if bad := f.check(t, s); len(bad) > 0 {
				t.Errorf("after heal: %v", bad)
			}
			// The journal alone holds everything again.
			dropMetaCopy(t, s, indexRecordAt{key: []byte{prefixIndexEntry, 0}, val: nil})
			s.Close()
			s, err = Open("store", &Options{FS: fs})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if rep := s.MetaReport(); rep.Healed || len(rep.Damage) > 0 || !rep.Full {
				t.Errorf("second open: %+v", rep)
			}
			if bad := f.check(t, s); len(bad) > 0 {
				t.Errorf("from the healed journal alone: %v", bad)
			}
		})
	}
}

func writeFile(t testing.TB, fs vfs.FS, path string, b []byte) {
	t.Helper()
	w, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	w.Close()
}

// TestPutBatchPinned: the artifacts and the pin come in one step; a
// collection right after keeps them.
func TestPutBatchPinned(t *testing.T) {
	t.Parallel()
	s := newMemStore(t, nil)
	ctx := context.Background()
	arts := []asl.Artifact{asl.Untagged([]byte("leaf")), asl.Untagged([]byte("root"))}
	refs, err := s.PutBatchPinned(ctx, asl.HashSHA256, arts, 1, "snap", asl.PinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutBatchPinned(ctx, asl.HashSHA256, arts[:1], 0, "snap", asl.PinOptions{}); !errors.Is(err, asl.ErrPinExists) {
		t.Fatalf("re-point without force: %v", err)
	}
	rep, err := s.GC(ctx, GCOptions{Children: noChildren})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(ctx, refs[1]); err != nil {
		t.Fatalf("pinned root collected: %v (gc %+v)", err, rep)
	}
	if _, err := s.Stat(ctx, refs[0]); !errors.Is(err, asl.ErrNotFound) {
		t.Fatalf("unpinned leaf kept: %v", err)
	}
	log, err := s.PinLog(ctx, "snap")
	if err != nil || len(log) != 1 || log[0].New != refs[1] {
		t.Fatalf("log = %+v, %v", log, err)
	}
}

// TestSalvageKeepsMeta: salvage copies the pins, their history and the
// metadata entries from the journal, and does not bring back what a
// tombstone deleted.
func TestSalvageKeepsMeta(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	s, err := Create("store", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	f := writeMetaFixture(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Salvage(context.Background(), "store", "salvaged", &Options{FS: fs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.MetaRecords == 0 {
		t.Errorf("report %+v: no journal record copied", rep)
	}
	ns, err := Open("salvaged", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if bad := f.check(t, ns); len(bad) > 0 {
		t.Errorf("salvaged: %v", bad)
	}
}

// TestPutPinnedUnderGC: collections running back to back never take what
// PutBatchPinned stores before its pin lands.
func TestPutPinnedUnderGC(t *testing.T) {
	t.Parallel()
	s := newMemStore(t, nil)
	ctx := context.Background()
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if _, err := s.GC(ctx, GCOptions{Children: noChildren}); err != nil {
				done <- err
				return
			}
		}
	}()
	for i := range 30 {
		art := asl.Untagged([]byte{byte(i), 'p'})
		refs, err := s.PutBatchPinned(ctx, asl.HashSHA256, []asl.Artifact{art}, 0, "p", asl.PinOptions{Force: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Stat(ctx, refs[0]); err != nil {
			t.Fatalf("put %d: pinned artifact gone: %v", i, err)
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
