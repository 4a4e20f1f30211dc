package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/aslutil"
	"github.com/amduat/amduat/internal/longtest"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// The flip test damages one byte of one store file at a time, on a fresh
// copy of a store, and checks what the store makes of it (issue 11, SPECS.md
// §6.2, §6.4 "Damage"): every flip must be harmless, recovered, or reported
// as integrity damage; no read may ever return wrong bytes, and no
// acknowledged artifact may disappear without a report. It is the
// corruption counterpart of the crash tests, in the style of Pebble's
// metamorphic tests: one deterministic workload, many damaged copies.
//
// AMDUAT_FLIPS=N runs N flips spread evenly over the file kinds found in the
// store (default: 20 per kind, 10 under -race); AMDUAT_FLIP_SEED varies
// which bytes are hit; AMDUAT_FLIPS_OUT=FILE writes the table there. Each
// flip is, from the worst outcome to the best:
//
//   - wrong bytes: a read (of the store or of its salvaged copy) returned
//     bytes that are not the artifact's, or not the index entry's;
//   - wrong class: damage was reported as something else than
//     asl.ErrIntegrity (an I/O error);
//   - lost: an acknowledged artifact was not found, and no report named it;
//   - detected: damage was reported (asl.ErrIntegrity), and some artifact
//     (or index entry) could not be read back, even by salvage: each is
//     named by a failing read or by verify;
//   - recovered: the store noticed the damage (Open failed, or rebuilt
//     index records from the packs, or a read failed) and every
//     acknowledged artifact is back, from the store or from salvage;
//   - harmless: nothing a reader can see changed.
//
// The test fails on any wrong bytes, wrong class or loss.

// flipKind names the kind of a store file by its name.
func flipKind(path string) string {
	base := path[strings.LastIndexByte(path, '/')+1:]
	switch {
	case strings.HasPrefix(base, "MANIFEST-"):
		return "manifest"
	case strings.HasPrefix(base, "OPTIONS-"):
		return "options"
	case strings.HasSuffix(base, ".log"):
		return "wal"
	case strings.HasSuffix(base, ".sst"):
		return "sstable"
	case strings.HasSuffix(base, ".blob"):
		return "blob"
	case strings.HasSuffix(base, packSuffix):
		return "pack"
	case base == journalName:
		return "journal"
	case strings.HasPrefix(base, "marker."):
		return "marker"
	}
	return "other:" + base
}

// memFiles is a snapshot of every file of a MemFS: path to contents.
type memFiles map[string][]byte

func snapshotFS(t testing.TB, fs vfs.FS, dir string, out memFiles) {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		p := fs.PathJoin(dir, n)
		st, err := fs.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.IsDir() {
			out[p+"/"] = nil
			snapshotFS(t, fs, p, out)
			continue
		}
		f, err := fs.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[p] = b
	}
}

// restoreFS builds a MemFS holding files, with the byte at off of path
// XORed with x.
func restoreFS(t testing.TB, files memFiles, path string, off int64, x byte) *vfs.MemFS {
	t.Helper()
	fs := vfs.NewMem()
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		if strings.HasSuffix(p, "/") {
			if err := fs.MkdirAll(strings.TrimSuffix(p, "/"), 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		// Write a copy: under -race, Pebble's MemFS mangles the buffers
		// written to it (to catch callers that reuse them).
		b := bytes.Clone(files[p])
		if p == path {
			b[off] ^= x
		}
		if err := fs.MkdirAll(fs.PathDir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := fs.Create(p, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(b); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	return fs
}

// flipChunk is the chunk size of the flip workload: small, so that the
// store has many chunks and Pebble blocks stay small.
const flipChunk = 8 << 10

// flipOptions are the default options but for the chunk size. With
// AMDUAT_FLIP_LAYOUT=v2 they are those the before table of issue 11 was
// taken with (InlineMax 2 KiB, IngestMin 96 KiB, PackMin 16 KiB: the
// version 2 layout writes inline records, single chunks, staged chunks,
// ingested tables and packs), to see what this code makes of damage to
// such a store; its guarantees (SPECS.md §6.1, "Damage") do not cover it,
// and the test then only reports.
func flipOptions(fs vfs.FS) *Options {
	if flipLegacy() {
		return &Options{FS: fs, ChunkSize: flipChunk, InlineMax: 2 << 10, IngestMin: 12 * flipChunk, PackMin: 16 << 10}
	}
	return &Options{FS: fs, ChunkSize: flipChunk}
}

func flipLegacy() bool { return os.Getenv("AMDUAT_FLIP_LAYOUT") == "v2" }

// flipWorkload fills a store with every kind of record the store writes
// (whole and large artifacts by every put path; with AMDUAT_FLIP_LAYOUT=v2
// inline, single chunk, chunked and ingested ones too; index entries, one
// large enough for a blob file), part of it flushed into tables and blob
// files and part of it left in the write-ahead log, and closes it. It
// returns the artifacts and index entries acknowledged.
func flipWorkload(t testing.TB, fs vfs.FS) (map[asl.Reference]asl.Artifact, []asl.IndexEntry) {
	acked, entries, _ := flipWorkloadKill(t, fs, false)
	return acked, entries
}

// flipWorkloadKill is flipWorkload; with kill set, fs must be crashable and
// the store is not closed: the process is killed after the last put was
// acknowledged, so the index commits of the second half, never synced,
// are lost (a crash clone keeping only synced bytes, returned), and the
// next Open rebuilds them from the pack tails (SPECS.md §6.4, "Recovery").
func flipWorkloadKill(t testing.TB, fs vfs.FS, kill bool) (map[asl.Reference]asl.Artifact, []asl.IndexEntry, *vfs.MemFS) {
	t.Helper()
	ctx := context.Background()
	s, err := Create("store", flipOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	acked := map[asl.Reference]asl.Artifact{}
	var entries []asl.IndexEntry
	putOne := func(a asl.Artifact) {
		ref, err := asl.PutArtifact(ctx, s, asl.HashSHA256, a)
		if err != nil {
			t.Fatal(err)
		}
		acked[ref] = a
	}
	putBatch := func(arts []asl.Artifact) {
		refs, err := s.PutBatch(ctx, asl.HashSHA256, arts)
		if err != nil {
			t.Fatal(err)
		}
		for i, ref := range refs {
			acked[ref] = arts[i]
		}
	}
	phase := func(seed uint64) {
		for i := range 8 {
			a := asl.Untagged(genBytes(seed+uint64(i), 20+i*150, i%2 == 0))
			if i%3 == 0 {
				a = asl.Tagged(asl.TypeTag(i), a.Bytes)
			}
			putOne(a)
		}
		for i := range 3 {
			putOne(asl.Untagged(genBytes(seed+10+uint64(i), 3000+i*1000, i == 1)))
		}
		var batch []asl.Artifact
		for i := range 30 {
			batch = append(batch, asl.Tagged(asl.TypeTag(i), genBytes(seed+20+uint64(i), 200+i*40, i%3 == 0)))
		}
		putBatch(batch) // new: packed while hashed
		putBatch([]asl.Artifact{asl.Untagged(genBytes(seed+60, 900, false)), asl.Untagged(genBytes(seed+61, 3*flipChunk+100, true)), acked2(acked)})
		for i := range 2 {
			putOne(asl.Untagged(genBytes(seed+70+uint64(i), 5*flipChunk+7, i == 0)))
		}
		putOne(asl.Untagged(genBytes(seed+80, 13*flipChunk+1, false)))
		a := asl.Untagged(genBytes(seed+90, 700, false))
		en := []asl.IndexEntry{
			{Space: "flip.small", Key: []byte(fmt.Sprint(seed)), Value: genBytes(seed+91, 34, false)},
			{Space: "flip.large", Key: []byte(fmt.Sprint(seed)), Value: genBytes(seed+92, 3*flipChunk, false)},
		}
		refs, err := s.PutIndexed(ctx, asl.HashSHA256, []asl.Artifact{a}, en)
		if err != nil {
			t.Fatal(err)
		}
		acked[refs[0]] = a
		entries = append(entries, en...)
	}
	phase(1000)
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	phase(2000)
	var clone *vfs.MemFS
	if kill {
		clone = fs.(*vfs.MemFS).CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return acked, entries, clone
}

// acked2 returns one artifact of acked (a re-put of a stored artifact).
func acked2(acked map[asl.Reference]asl.Artifact) asl.Artifact {
	best := asl.Reference{}
	for ref := range acked {
		if best.IsZero() || bytes.Compare(ref.Bytes(), best.Bytes()) < 0 {
			best = ref
		}
	}
	if best.IsZero() {
		return asl.Untagged([]byte("first"))
	}
	return acked[best]
}

// flipOutcome is what one flip did, from the worst to the best.
type flipOutcome int

const (
	flipWrongBytes flipOutcome = iota // a read returned bytes that are not the artifact's
	flipWrongClass                    // damage reported as something else than ERR_INTEGRITY
	flipSilentLoss                    // an acknowledged artifact missing without any report
	flipDetected                      // reported as ERR_INTEGRITY; some artifact not recovered
	flipRecovered                     // noticed, and every acknowledged artifact is back
	flipHarmless                      // nothing changed that a reader can see
	flipOutcomes
)

var flipOutcomeNames = [flipOutcomes]string{"wrong bytes", "wrong class", "silent loss", "detected", "recovered", "harmless"}

// flipReport is the result of one flip.
type flipReport struct {
	outcome flipOutcome
	detail  string
	lost    int // acknowledged artifacts lost without a report
	// entriesLost counts index entries (derived data) that read as absent.
	entriesLost int
	slowest     time.Duration // the slowest single read (Open, Get, Verify)
	// unopenable: Open failed (with ErrIntegrity: salvage is the way out).
	unopenable bool
}

// salvageFunc, when set (salvage_test.go), copies what can be read from the
// damaged store on fs into a new store and returns it, for the flip test's
// last resort.
var salvageFunc func(t testing.TB, fs vfs.FS) (*Store, error)

// checkFlip opens the damaged copy and reads every acknowledged artifact,
// verifies the store, and, when something failed, salvages it. An
// acknowledged artifact that is not found counts as silently lost unless a
// report names it (a read or verify failure wrapping ErrIntegrity, salvage's
// list of losses) or the store said it was damaged (Open or verify failed,
// or verify reported damage) and salvage brought the artifact back. An Open
// that fails with ErrIntegrity reports the whole store damaged.
func checkFlip(t testing.TB, fs vfs.FS, acked map[asl.Reference]asl.Artifact, entries []asl.IndexEntry) flipReport {
	ctx := context.Background()
	var (
		rep        flipReport
		wrongBytes []string
		wrongClass []string
		missing    = map[asl.Reference]bool{} // not found
		named      = map[asl.Reference]bool{} // named by an integrity report
		cue        = false                    // the store reported damage
		openFailed = false
		recovered  = false // the store rebuilt something itself
		// entryDamage: an index entry failed to read with ErrIntegrity.
		entryDamage = false
	)
	timed := func(f func()) {
		start := time.Now()
		f()
		rep.slowest = max(rep.slowest, time.Since(start))
	}
	classify := func(what string, err error) bool {
		if errors.Is(err, asl.ErrIntegrity) {
			return true
		}
		wrongClass = append(wrongClass, fmt.Sprintf("%s: %v", what, err))
		return false
	}
	var (
		s    *Store
		oerr error
	)
	timed(func() { s, oerr = Open("store", flipOptions(fs)) })
	if oerr != nil {
		classify("open", oerr)
		openFailed, cue = true, true
	} else {
		recovered = s.packRecovered > 0 || s.fullRescan
		for ref, a := range acked {
			var (
				got asl.Artifact
				err error
			)
			timed(func() { got, err = asl.Get(ctx, s, ref, 0) })
			switch {
			case err == nil:
				if !sameArtifact(got, a) {
					wrongBytes = append(wrongBytes, "get "+ref.String())
				}
			case errors.Is(err, asl.ErrNotFound) && !errors.Is(err, asl.ErrIntegrity):
				missing[ref] = true
			case classify("get "+ref.String(), err):
				named[ref], cue = true, true
			}
		}
		// Index entries are derived data (SPECS.md §6.5): one may be
		// missing, but never read back other bytes, and a failure to read
		// it is ErrIntegrity.
		for _, en := range entries {
			v, ok, err := s.LookupIndex(ctx, en.Space, en.Key)
			switch {
			case err != nil:
				if classify("lookup "+en.Space, err) {
					cue, entryDamage = true, true
				}
			case !ok:
				rep.entriesLost++
			case !bytes.Equal(v, en.Value):
				wrongBytes = append(wrongBytes, "index entry "+en.Space)
			}
		}
		start := time.Now()
		vr, verr := aslutil.Verify(ctx, s, aslutil.VerifyOptions{Workers: 1}, nil)
		if verr != nil && classify("verify", verr) {
			cue = true
		}
		for _, f := range vr.Failures {
			if classify("verify "+f.Ref.String(), f.Err) || errors.Is(f.Err, asl.ErrNotFound) {
				named[f.Ref], cue = true, true
			}
		}
		if d := time.Since(start); vr.Checked > 0 {
			rep.slowest = max(rep.slowest, d/time.Duration(vr.Checked))
		}
		if cerr := s.Close(); cerr != nil {
			classify("close", cerr)
		}
	}
	// Salvage, when the store said something was wrong.
	salvaged := map[asl.Reference]bool{}
	if cue && salvageFunc != nil {
		ns, err := salvageFunc(t, fs)
		if err != nil {
			classify("salvage", err)
		} else {
			for ref, a := range acked {
				got, err := asl.Get(ctx, ns, ref, 0)
				switch {
				case err == nil && sameArtifact(got, a):
					salvaged[ref] = true
				case err == nil:
					wrongBytes = append(wrongBytes, "salvaged "+ref.String())
				}
			}
			ns.Close()
		}
	}
	lost, gone := 0, 0
	for ref := range acked {
		bad := openFailed || missing[ref] || named[ref]
		if !bad || salvaged[ref] {
			continue
		}
		gone++
		if missing[ref] && !named[ref] {
			lost++
		}
	}
	rep.lost = lost
	rep.unopenable = openFailed
	switch {
	case len(wrongBytes) > 0:
		rep.outcome, rep.detail = flipWrongBytes, strings.Join(wrongBytes, "; ")
	case len(wrongClass) > 0:
		rep.outcome, rep.detail = flipWrongClass, wrongClass[0]
	case lost > 0:
		rep.outcome, rep.detail = flipSilentLoss, fmt.Sprintf("%d acknowledged artifacts missing, none named by a report", lost)
	case gone > 0:
		rep.outcome, rep.detail = flipDetected, fmt.Sprintf("%d of %d acknowledged artifacts reported damaged and not recovered", gone, len(acked))
	case entryDamage:
		rep.outcome, rep.detail = flipDetected, "an index entry reads as damaged (ERR_INTEGRITY)"
	case cue || len(missing) > 0 || recovered:
		rep.outcome = flipRecovered
	default:
		rep.outcome = flipHarmless
	}
	return rep
}

// flipCount is the number of flips: AMDUAT_FLIPS, else a CI sample: 20
// per kind, 1 under -race or -short unless AMDUAT_LONG=1 (.ci/run's long
// step; internal/longtest; it was 2: issue 25).
func flipCount(t *testing.T, kinds int) int {
	if v := os.Getenv("AMDUAT_FLIPS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("AMDUAT_FLIPS=%q: want a positive number", v)
		}
		return n
	}
	per := 20
	if (raceEnabled || testing.Short()) && !longtest.Enabled() {
		per = 1
	}
	return per * kinds
}

func TestFlipBytes(t *testing.T) {
	t.Parallel()
	seed := uint64(11)
	if v := os.Getenv("AMDUAT_FLIP_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("AMDUAT_FLIP_SEED=%q: %v", v, err)
		}
		seed = n
	}
	fs := vfs.NewMem()
	acked, entries := flipWorkload(t, fs)
	files := memFiles{}
	snapshotFS(t, fs, "store", files)
	byKind := map[string][]string{}
	for p, b := range files {
		if len(b) > 0 {
			byKind[flipKind(p)] = append(byKind[flipKind(p)], p)
		}
	}
	// Kind "pack-killed": the packs of a store whose process was killed
	// before the index commits of its last puts (issue 20): Open must
	// rebuild them from the pack tails, past the damage.
	killedAcked, _, killed := flipWorkloadKill(t, vfs.NewCrashableMem(), true)
	killedFiles := memFiles{}
	snapshotFS(t, killed, "store", killedFiles)
	for p, b := range killedFiles {
		if len(b) > 0 && flipKind(p) == "pack" {
			byKind["pack-killed"] = append(byKind["pack-killed"], p)
		}
	}
	kinds := make([]string, 0, len(byKind))
	for k := range byKind {
		slices.Sort(byKind[k])
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	n := flipCount(t, len(kinds))
	rng := rand.New(rand.NewPCG(seed, 0x666c6970))
	type row struct {
		flips   int
		out     [flipOutcomes]int
		lost    int
		entries int
		unopen  int
		slowest time.Duration
	}
	rows := map[string]*row{}
	var bad []string
	for i := range n {
		kind := kinds[i%len(kinds)]
		paths := byKind[kind]
		path := paths[rng.IntN(len(paths))]
		set, setAcked, setEntries := files, acked, entries
		if kind == "pack-killed" {
			set, setAcked, setEntries = killedFiles, killedAcked, nil
		}
		off := rng.Int64N(int64(len(set[path])))
		x := byte(1 + rng.IntN(255))
		rep := checkFlip(t, restoreFS(t, set, path, off, x), setAcked, setEntries)
		r := rows[kind]
		if r == nil {
			r = &row{}
			rows[kind] = r
		}
		r.flips++
		r.out[rep.outcome]++
		r.slowest = max(r.slowest, rep.slowest)
		r.lost += rep.lost
		r.entries += rep.entriesLost
		if rep.unopenable {
			r.unopen++
		}
		if rep.outcome <= flipSilentLoss {
			bad = append(bad, fmt.Sprintf("%s %s byte %d ^ %#02x: %s: %s", kind, path, off, x, flipOutcomeNames[rep.outcome], rep.detail))
		}
		if testing.Verbose() {
			t.Logf("flip %d: %s %s byte %d/%d ^ %#02x: %s %s (slowest read %v)", i, kind, path, off, len(set[path]), x, flipOutcomeNames[rep.outcome], rep.detail, rep.slowest.Round(time.Millisecond))
		}
	}
	var tb strings.Builder
	fmt.Fprintf(&tb, "%d acknowledged artifacts, %d index entries, %d flips, seed %d\n", len(acked), len(entries), n, seed)
	fmt.Fprintf(&tb, "%-11s %6s %9s %9s %9s %6s %12s %12s %15s %13s %11s %14s\n", "kind", "flips", "harmless", "recovered", "detected", "lost", "wrong class", "wrong bytes", "artifacts lost", "entries lost", "unopenable", "slowest read")
	var total row
	for _, k := range kinds {
		r := rows[k]
		if r == nil {
			continue
		}
		fmt.Fprintf(&tb, "%-11s %6d %9d %9d %9d %6d %12d %12d %15d %13d %11d %14v\n", k, r.flips, r.out[flipHarmless], r.out[flipRecovered], r.out[flipDetected], r.out[flipSilentLoss], r.out[flipWrongClass], r.out[flipWrongBytes], r.lost, r.entries, r.unopen, r.slowest.Round(time.Millisecond))
		total.flips += r.flips
		for o := range r.out {
			total.out[o] += r.out[o]
		}
		total.slowest = max(total.slowest, r.slowest)
		total.lost += r.lost
		total.entries += r.entries
		total.unopen += r.unopen
	}
	fmt.Fprintf(&tb, "%-11s %6d %9d %9d %9d %6d %12d %12d %15d %13d %11d %14v\n", "all", total.flips, total.out[flipHarmless], total.out[flipRecovered], total.out[flipDetected], total.out[flipSilentLoss], total.out[flipWrongClass], total.out[flipWrongBytes], total.lost, total.entries, total.unopen, total.slowest.Round(time.Millisecond))
	t.Logf("flip table:\n%s", tb.String())
	if out := os.Getenv("AMDUAT_FLIPS_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(tb.String()+strings.Join(bad, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range bad {
		if flipLegacy() {
			t.Log(b)
		} else {
			t.Error(b)
		}
	}
}

// TestDamagedReadTime measures (it asserts nothing about speed) how long a
// read of an artifact whose stored bytes were damaged takes to fail, with
// the default options, per file kind: one byte in the middle of each data
// file of a store holding one 1 MiB artifact and a batch of small ones.
// Run with AMDUAT_FLIP_TIMING=1 -v.
func TestDamagedReadTime(t *testing.T) {
	// Not parallel: it measures wall time.
	if os.Getenv("AMDUAT_FLIP_TIMING") == "" {
		t.Skip("set AMDUAT_FLIP_TIMING=1 to measure")
	}
	ctx := context.Background()
	fs := vfs.NewMem()
	s, err := Create("store", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	acked := map[asl.Reference]asl.Artifact{}
	big := asl.Untagged(genBytes(7, 1<<20, false))
	acked[put(t, s, asl.HashSHA256, big)] = big
	var batch []asl.Artifact
	for i := range 200 {
		batch = append(batch, asl.Untagged(genBytes(100+uint64(i), 1000, false)))
	}
	refs, err := s.PutBatch(ctx, asl.HashSHA256, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, ref := range refs {
		acked[ref] = batch[i]
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	files := memFiles{}
	snapshotFS(t, fs, "store", files)
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		kind := flipKind(p)
		if len(files[p]) == 0 || (kind != "blob" && kind != "sstable" && kind != "pack") {
			continue
		}
		fs := restoreFS(t, files, p, int64(len(files[p])/2), 0x5a)
		s, err := Open("store", &Options{FS: fs})
		if err != nil {
			t.Logf("%s: open: %v", p, err)
			continue
		}
		var slowest time.Duration
		failed := 0
		for ref := range acked {
			start := time.Now()
			_, err := asl.Get(ctx, s, ref, 0)
			if err != nil {
				failed++
				slowest = max(slowest, time.Since(start))
			}
		}
		s.Close()
		t.Logf("%-8s %-24s %d bytes: %d reads failed, slowest %v", kind, p, len(files[p]), failed, slowest.Round(time.Millisecond))
	}
}
