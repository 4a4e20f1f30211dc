package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/internal/longtest"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestFlipMeta is the flip test of the store metadata that nothing
// rebuilds (SPECS.md §6.4, "Metadata journal", "Damage"; issue 20): pins
// and their history, run log records, the cache salt and a deletion, the
// last pin and run log record left in Pebble's write-ahead log. One byte
// of one file is damaged at a time, in every kind of file of the store
// (the journal and the log first of all), and the store must give back
// every pin and every run log record, from itself (harmless, or healed:
// replayed from the journal, or the journal written anew from the index)
// or, when it reports the damage (ERR_INTEGRITY), from its salvaged copy
// (detected). A pin or record missing or changed is a failure, and so is
// a deleted artifact that comes back.
//
// AMDUAT_FLIPS=N runs N flips per kind (default 20; under -race or -short
// 4, 10 with AMDUAT_LONG=1, internal/longtest: issue 25);
// AMDUAT_FLIP_SEED varies which bytes are hit; AMDUAT_FLIPS_OUT=FILE
// writes the table there.
func TestFlipMeta(t *testing.T) {
	t.Parallel()
	if flipLegacy() {
		t.Skip("the version 2 layout keeps no journal guarantee")
	}
	seed := uint64(20)
	if v := os.Getenv("AMDUAT_FLIP_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("AMDUAT_FLIP_SEED=%q: %v", v, err)
		}
		seed = n
	}
	per := 20
	if raceEnabled || testing.Short() {
		per = longtest.Count(4, 10)
	}
	if v := os.Getenv("AMDUAT_FLIPS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("AMDUAT_FLIPS=%q: want a positive number", v)
		}
		per = n
	}
	fs := vfs.NewMem()
	f := flipMetaWorkload(t, fs)
	files := memFiles{}
	snapshotFS(t, fs, "store", files)
	byKind := map[string][]string{}
	for p, b := range files {
		if len(b) > 0 {
			byKind[flipKind(p)] = append(byKind[flipKind(p)], p)
		}
	}
	var kinds []string
	for k := range byKind {
		slices.Sort(byKind[k])
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, must := range []string{"journal", "wal"} {
		if len(byKind[must]) == 0 {
			t.Fatalf("the workload left no %s file: %v", must, kinds)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x6d657461))
	type row struct {
		flips                                                         int
		harmless, healed, detected, lost, wrong, undeleted, pins, log int
	}
	rows := map[string]*row{}
	var bad []string
	for _, kind := range kinds {
		r := &row{}
		rows[kind] = r
		for range per {
			paths := byKind[kind]
			path := paths[rng.IntN(len(paths))]
			off := rng.Int64N(int64(len(files[path])))
			x := byte(1 + rng.IntN(255))
			res := checkMetaFlip(t, restoreFS(t, files, path, off, x), f)
			r.flips++
			r.pins += res.pinsLost
			r.log += res.logLost
			switch res.outcome {
			case "harmless":
				r.harmless++
			case "healed":
				r.healed++
			case "detected":
				r.detected++
			case "lost":
				r.lost++
			case "wrong bytes":
				r.wrong++
			case "undeleted":
				r.undeleted++
			}
			if res.outcome == "lost" || res.outcome == "wrong bytes" || res.outcome == "undeleted" {
				bad = append(bad, fmt.Sprintf("%s byte %d ^ %#02x: %s: %s", path, off, x, res.outcome, res.detail))
			}
			if testing.Verbose() {
				t.Logf("%s byte %d/%d ^ %#02x: %s %s", path, off, len(files[path]), x, res.outcome, res.detail)
			}
		}
	}
	var tb strings.Builder
	fmt.Fprintf(&tb, "%d pins, %d pin changes, %d run log and config entries, 1 deletion; %d flips per kind, seed %d\n", len(f.pins), f.history, len(f.entries), per, seed)
	fmt.Fprintf(&tb, "%-10s %6s %9s %7s %9s %5s %12s %10s %10s %16s\n", "kind", "flips", "harmless", "healed", "detected", "lost", "wrong bytes", "undeleted", "pins lost", "log records lost")
	var tot row
	for _, k := range kinds {
		r := rows[k]
		fmt.Fprintf(&tb, "%-10s %6d %9d %7d %9d %5d %12d %10d %10d %16d\n", k, r.flips, r.harmless, r.healed, r.detected, r.lost, r.wrong, r.undeleted, r.pins, r.log)
		tot.flips += r.flips
		tot.harmless += r.harmless
		tot.healed += r.healed
		tot.detected += r.detected
		tot.lost += r.lost
		tot.wrong += r.wrong
		tot.undeleted += r.undeleted
		tot.pins += r.pins
		tot.log += r.log
	}
	fmt.Fprintf(&tb, "%-10s %6d %9d %7d %9d %5d %12d %10d %10d %16d\n", "all", tot.flips, tot.harmless, tot.healed, tot.detected, tot.lost, tot.wrong, tot.undeleted, tot.pins, tot.log)
	t.Logf("meta flip table:\n%s", tb.String())
	if out := os.Getenv("AMDUAT_FLIPS_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(tb.String()+strings.Join(bad, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range bad {
		t.Error(b)
	}
}

// flipMetaWorkload writes the metadata fixture and some artifacts, flushes
// them into tables, then writes the last pin and run log record, which stay
// in Pebble's write-ahead log, and closes the store.
func flipMetaWorkload(t testing.TB, fs vfs.FS) metaFixture {
	t.Helper()
	ctx := context.Background()
	s, err := Create("store", flipOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	var arts []asl.Artifact
	for i := range 20 {
		arts = append(arts, asl.Untagged(genBytes(uint64(300+i), 100+i*50, i%2 == 0)))
	}
	if _, err := s.PutBatch(ctx, asl.HashSHA256, arts); err != nil {
		t.Fatal(err)
	}
	f := writeMetaFixture(t, s)
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	last := putSmall(t, s, "pinned last")
	if err := s.Pin(ctx, "last", last, asl.PinOptions{}); err != nil {
		t.Fatal(err)
	}
	f.pins["last"] = last
	f.history++
	rec := asl.IndexEntry{Space: "surf.log", Key: []byte("0002-run"), Value: []byte("record 2")}
	if _, err := s.PutIndexed(ctx, asl.HashSHA256, []asl.Artifact{asl.Untagged([]byte("result 2"))}, []asl.IndexEntry{rec}); err != nil {
		t.Fatal(err)
	}
	f.entries = append(f.entries, rec)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return f
}

type metaFlipResult struct {
	outcome           string
	detail            string
	pinsLost, logLost int
}

// metaLook is what one store gives back of a metaFixture.
type metaLook struct {
	missing, wrong []string
	pinsLost       int
	logLost        int
	undeleted      bool
	integrity      bool // a read failed with ErrIntegrity
	other          error
}

func lookMeta(s *Store, f metaFixture) metaLook {
	ctx := context.Background()
	var l metaLook
	note := func(what string, err error) {
		if errors.Is(err, asl.ErrIntegrity) {
			l.integrity = true
		} else if l.other == nil {
			l.other = fmt.Errorf("%s: %w", what, err)
		}
	}
	pins, err := s.Pins(ctx)
	if err != nil {
		note("pins", err)
	}
	got := map[string]asl.Reference{}
	for _, p := range pins {
		got[p.Name] = p.Ref
	}
	for n, r := range f.pins {
		switch g, ok := got[n]; {
		case !ok && err == nil:
			l.missing = append(l.missing, "pin "+n)
			l.pinsLost++
		case !ok:
			l.pinsLost++
		case g != r:
			l.wrong = append(l.wrong, "pin "+n)
		}
	}
	for n := range got {
		if _, ok := f.pins[n]; !ok {
			l.wrong = append(l.wrong, "pin "+n+" added")
		}
	}
	for _, e := range f.entries {
		v, ok, err := s.LookupIndex(ctx, e.Space, e.Key)
		switch {
		case err != nil:
			note("lookup", err)
			l.logLost++
		case !ok:
			l.missing = append(l.missing, e.Space+" "+string(e.Key))
			l.logLost++
		case !bytes.Equal(v, e.Value):
			l.wrong = append(l.wrong, e.Space+" "+string(e.Key))
		}
	}
	if _, ok, err := s.LookupIndex(ctx, "surf.log", []byte("0000-run")); err == nil && ok {
		l.wrong = append(l.wrong, "trimmed run log record back")
	}
	if log, err := s.PinLog(ctx, ""); err != nil {
		note("pin log", err)
	} else if len(log) != f.history {
		l.missing = append(l.missing, fmt.Sprintf("pin history: %d of %d changes", len(log), f.history))
	}
	if _, err := s.Stat(ctx, f.deleted); err == nil {
		l.undeleted = true
	} else if !errors.Is(err, asl.ErrNotFound) || errors.Is(err, asl.ErrIntegrity) {
		note("stat", err)
	}
	return l
}

func checkMetaFlip(t testing.TB, fs vfs.FS, f metaFixture) metaFlipResult {
	s, err := Open("store", flipOptions(fs))
	var look metaLook
	healed := false
	if err == nil {
		look = lookMeta(s, f)
		rep := s.MetaReport()
		healed = rep.Replayed > 0 || rep.Healed || len(rep.Damage) > 0 || s.packRecovered > 0 || s.fullRescan
		s.Close()
		if look.other != nil {
			return metaFlipResult{outcome: "lost", detail: "not ERR_INTEGRITY: " + look.other.Error()}
		}
		switch {
		case len(look.wrong) > 0:
			return metaFlipResult{outcome: "wrong bytes", detail: strings.Join(look.wrong, ", ")}
		case look.undeleted:
			return metaFlipResult{outcome: "undeleted", detail: "a deleted artifact is back"}
		case !look.integrity && len(look.missing) > 0:
			return metaFlipResult{outcome: "lost", detail: "without a report: " + strings.Join(look.missing, ", "), pinsLost: look.pinsLost, logLost: look.logLost}
		case !look.integrity && healed:
			return metaFlipResult{outcome: "healed"}
		case !look.integrity:
			return metaFlipResult{outcome: "harmless"}
		}
	} else if !errors.Is(err, asl.ErrIntegrity) {
		return metaFlipResult{outcome: "lost", detail: "open failed, not with ERR_INTEGRITY: " + err.Error()}
	}
	// Damage reported: the salvaged copy must hold everything.
	ns, err := salvageFunc(t, fs)
	if err != nil {
		return metaFlipResult{outcome: "lost", detail: "salvage: " + err.Error(), pinsLost: len(f.pins), logLost: len(f.entries)}
	}
	defer ns.Close()
	sl := lookMeta(ns, f)
	switch {
	case len(sl.wrong) > 0:
		return metaFlipResult{outcome: "wrong bytes", detail: "salvaged: " + strings.Join(sl.wrong, ", ")}
	case sl.undeleted:
		return metaFlipResult{outcome: "undeleted", detail: "salvage brought a deleted artifact back"}
	case len(sl.missing) > 0 || sl.integrity || sl.other != nil:
		return metaFlipResult{outcome: "lost", detail: fmt.Sprintf("salvaged: missing %v, %v", sl.missing, sl.other), pinsLost: sl.pinsLost, logLost: sl.logLost}
	}
	return metaFlipResult{outcome: "detected"}
}
