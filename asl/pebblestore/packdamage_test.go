package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/aslutil"
	"github.com/amduat/amduat/internal/longtest"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// killedBatch is the crash of issue 20's reproduction: a put of 40
// artifacts of 1 KiB is acknowledged, and the process dies before its index
// commit reaches Pebble's log (a crash clone that keeps only synced bytes:
// the pack, synced with its commit marker before the acknowledgement, is
// whole). It returns the clone, the artifacts, their references and the
// span [head, end of chunk value) of each one's record in pack 1.
func killedBatch(t *testing.T) (*vfs.MemFS, []asl.Artifact, []asl.Reference, [][2]int64) {
	t.Helper()
	ctx := context.Background()
	fs := vfs.NewCrashableMem()
	s, err := Create("store", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if formatV3Packs {
		rawSet(t, s, configKey(), encodeConfig(configRecord{Format: formatName, Version: 3, Hash: uint16(asl.HashSHA256)}))
	}
	arts := make([]asl.Artifact, 40)
	for i := range arts {
		arts[i] = asl.Untagged(genBytes(2000+uint64(i), 1024, false))
	}
	refs, err := s.PutBatch(ctx, asl.HashSHA256, arts)
	if err != nil {
		t.Fatal(err)
	}
	spans := make([][2]int64, len(refs))
	for i, ref := range refs {
		_, off, end := packRecordSpan(t, s, ref)
		spans[i] = [2]int64{off, end}
	}
	clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	s.Close()
	return clone, arts, refs, spans
}

// damagedTail is killedBatch with one byte at pack size − back then
// damaged (back = 14,000 is the issue's; other values hit other bytes).
// It also returns which artifact's record the damaged byte lies in.
func damagedTail(t *testing.T, back int64) (*vfs.MemFS, []asl.Artifact, []asl.Reference, int) {
	t.Helper()
	clone, arts, refs, spans := killedBatch(t)
	st, err := clone.Stat("store/packs/000001.pack")
	if err != nil {
		t.Fatal(err)
	}
	at := st.Size() - back
	hit := -1
	for i, sp := range spans {
		if sp[0] <= at && at < sp[1] {
			hit = i
		}
	}
	if hit < 0 {
		t.Fatalf("byte %d of the pack lies in no record", at)
	}
	b := readFileRange(t, clone, "store/packs/000001.pack", at, at+1)
	patchFile(t, clone, "store/packs/000001.pack", at, []byte{b[0] ^ 0x5a})
	return clone, arts, refs, hit
}

// TestPackDamageBeforeCommit: Open rebuilding the index from a pack tail
// resynchronises past a damaged record as salvage does, indexes every
// record after it, and records the damage: the damaged artifact fails every
// read with ERR_INTEGRITY naming it and the region, verify reports it, and
// a later put of it heals the store (SPECS.md §6.4, "Recovery").
func TestPackDamageBeforeCommit(t *testing.T) {
	t.Parallel()
	// 14,000 hits the reference in a record's head, 13,500 its payload;
	// 500 and 1,070 the payload and the head of the last record, which
	// only its commit marker follows ("Commit markers").
	for _, back := range []int64{14000, 13500, 500, 1070} {
		t.Run(fmt.Sprint(back), func(t *testing.T) { testPackDamageBeforeCommit(t, back) })
	}
}

func testPackDamageBeforeCommit(t *testing.T, back int64) {
	ctx := context.Background()
	fs, arts, refs, hit := damagedTail(t, back)
	for _, readOnly := range []bool{true, false} {
		s, err := Open("store", &Options{FS: fs, ReadOnly: readOnly})
		if err != nil {
			t.Fatalf("Open (read-only %v): %v", readOnly, err)
		}
		if s.packRecovered != 39 || s.packDamaged != 1 {
			t.Fatalf("Open (read-only %v) indexed %d records and found %d damaged regions, want 39 and 1", readOnly, s.packRecovered, s.packDamaged)
		}
		present := 0
		for i, ref := range refs {
			got, err := asl.Get(ctx, s, ref, 0)
			if i == hit {
				if !errors.Is(err, asl.ErrIntegrity) || errors.Is(err, asl.ErrNotFound) || !strings.Contains(err.Error(), ref.String()) || !strings.Contains(err.Error(), "000001.pack") {
					t.Fatalf("get of the damaged artifact: %v, want ERR_INTEGRITY naming it and its pack", err)
				}
				if _, err := s.Stat(ctx, ref); !errors.Is(err, asl.ErrIntegrity) {
					t.Fatalf("stat of the damaged artifact: %v, want ERR_INTEGRITY", err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("artifact %d: %v", i, err)
			}
			if !sameArtifact(got, arts[i]) {
				t.Fatalf("artifact %d differs", i)
			}
			present++
		}
		if present != 39 {
			t.Fatalf("%d present, want 39", present)
		}
		rep, err := aslutil.Verify(ctx, s, aslutil.VerifyOptions{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Checked != 39 || len(rep.Failures) != 0 || len(rep.Damage) != 1 ||
			!errors.Is(rep.Damage[0], asl.ErrIntegrity) || !strings.Contains(rep.Damage[0].Error(), refs[hit].String()) {
			t.Fatalf("verify: %d checked, failures %v, damage %v; want 39, none, and the damaged artifact named", rep.Checked, rep.Failures, rep.Damage)
		}
		s.Close()
	}
	// The damage was recorded with the rebuilt index: a second open
	// rebuilds nothing and still reports it.
	s, err := Open("store", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.packRecovered != 0 {
		t.Fatalf("second Open indexed %d records", s.packRecovered)
	}
	if _, err := s.Stat(ctx, refs[hit]); !errors.Is(err, asl.ErrIntegrity) {
		t.Fatalf("stat after a second open: %v, want ERR_INTEGRITY", err)
	}
	// Putting it again heals it: verify is clean.
	if _, err := s.PutBatch(ctx, asl.HashSHA256, arts[hit:hit+1]); err != nil {
		t.Fatal(err)
	}
	if got := get(t, s, refs[hit]); !sameArtifact(got, arts[hit]) {
		t.Fatal("re-put artifact differs")
	}
	rep, err := aslutil.Verify(ctx, s, aslutil.VerifyOptions{}, nil)
	if err != nil || rep.Checked != 40 || len(rep.Failures) != 0 || len(rep.Damage) != 0 {
		t.Fatalf("verify after the re-put: %+v, %v", rep, err)
	}
}

// TestPackTornTail: bytes after the last commit marker that do not check,
// with nothing after them that does (a crash mid-append), are a torn write:
// not indexed, not reported as damage, and the pack is sealed. A tail that
// lost only its commit marker keeps every record (they check), and so does
// one with a torn next append after its marker.
func TestPackTornTail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := vfs.NewCrashableMem()
	s, err := Create("store", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	arts := make([]asl.Artifact, 10)
	for i := range arts {
		arts[i] = asl.Untagged(genBytes(3000+uint64(i), 1024, false))
	}
	refs, err := s.PutBatch(ctx, asl.HashSHA256, arts)
	if err != nil {
		t.Fatal(err)
	}
	_, _, last := packRecordSpan(t, s, refs[9])
	clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	s.Close()
	files := memFiles{}
	snapshotFS(t, clone, "store", files)
	const pack = "store/packs/000001.pack"
	whole := files[pack]
	if int64(len(whole)) <= last {
		t.Fatalf("pack of %d bytes, last record ends at %d: no commit marker", len(whole), last)
	}
	// A torn next append: the head and half the payload of a record.
	next := appendPackHead(nil, refs[0], asl.Header{Size: 1024}, 1024)
	next = append(next, whole[last-1024-13:last-512]...)
	for _, c := range []struct {
		name      string
		tail      []byte
		recovered int
		end       int // the watermark past the pack's end: sealed
	}{
		{"in the last record", whole[:len(whole)-300], 9, 1},
		{"the commit marker only", whole[:last], 10, 0}, // whole records: continued
		{"half a commit marker", whole[:last+4], 10, 1},
		{"a torn next append", append(bytes.Clone(whole), next...), 10, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			files[pack] = c.tail
			s, err := Open("store", &Options{FS: restoreFS(t, files, pack, 0, 0)})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.packRecovered != c.recovered || s.packDamaged != 0 {
				t.Fatalf("Open indexed %d records, %d damaged regions; want %d and 0", s.packRecovered, s.packDamaged, c.recovered)
			}
			if c.recovered == 9 {
				if _, err := s.Stat(ctx, refs[9]); !errors.Is(err, asl.ErrNotFound) || errors.Is(err, asl.ErrIntegrity) {
					t.Fatalf("the torn record's artifact: %v, want not found", err)
				}
			}
			rep, err := aslutil.Verify(ctx, s, aslutil.VerifyOptions{}, nil)
			if err != nil || rep.Checked != int64(c.recovered) || len(rep.Failures) != 0 || len(rep.Damage) != 0 {
				t.Fatalf("verify: %+v, %v", rep, err)
			}
			if v := rawGet(t, s, watermarkKey(1)); !bytes.Equal(v, appendCBOR(nil, uint64(len(c.tail)+c.end))) {
				t.Fatalf("watermark %x, want %d", v, len(c.tail)+c.end)
			}
		})
	}
	files[pack] = whole
}

// TestPackTailFlips: after the crash of killedBatch, every byte of the last
// two records of the pack and of the commit marker after them is damaged in
// turn (one byte per copy); each time, Open's recovery leaves no
// acknowledged artifact missing without a report: each reads back whole or
// fails with ERR_INTEGRITY, and the damage is reported by stat (a read of
// the index alone), get and verify. The default run takes every byte of
// the heads, chunk headers and marker and every 32nd byte of the payloads
// (under -race: every 4th byte of the heads and chunk headers, every byte
// of the marker's last 16, every 256th of the payloads: 48 flips where
// every other byte and every 128th took 80; issue 25); AMDUAT_LONG=1 takes
// all of them.
func TestPackTailFlips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clone, arts, refs, spans := killedBatch(t)
	files := memFiles{}
	snapshotFS(t, clone, "store", files)
	const pack = "store/packs/000001.pack"
	size := int64(len(files[pack]))
	stride := int64(32)
	switch {
	case longtest.Enabled():
		stride = 1
	case raceEnabled:
		stride = 256
	}
	// payload reports whether off lies in the payload of one of the two
	// records (its last 1,024 bytes): the rest is heads and the marker.
	payload := func(off int64) bool {
		for _, sp := range spans[len(spans)-2:] {
			if sp[1]-1024 <= off && off < sp[1] {
				return true
			}
		}
		return false
	}
	var flips, damaged, harmless int
	for off := spans[len(spans)-2][0]; off < size; off++ {
		if payload(off) && off%stride != 0 || raceEnabled && !longtest.Enabled() && off < size-16 && off%4 != 0 {
			continue
		}
		flips++
		x := byte(1 + off%255)
		s, err := Open("store", &Options{FS: restoreFS(t, files, pack, off, x)})
		if err != nil {
			t.Fatalf("byte %d ^ %#02x: Open: %v", off, x, err)
		}
		reported := false
		for i, ref := range refs {
			_, serr := s.Stat(ctx, ref)
			got, gerr := asl.Get(ctx, s, ref, 0)
			switch {
			case serr == nil && gerr == nil:
				if !sameArtifact(got, arts[i]) {
					t.Fatalf("byte %d ^ %#02x: artifact %d reads back other bytes", off, x, i)
				}
			case errors.Is(serr, asl.ErrIntegrity) && errors.Is(gerr, asl.ErrIntegrity) && strings.Contains(gerr.Error(), ref.String()):
				reported = true
			default:
				t.Fatalf("byte %d ^ %#02x: artifact %d: stat %v, get %v; want it whole or ERR_INTEGRITY naming it", off, x, i, serr, gerr)
			}
		}
		rep, err := aslutil.Verify(ctx, s, aslutil.VerifyOptions{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if reported != (len(rep.Damage) > 0) {
			t.Fatalf("byte %d ^ %#02x: an artifact reported damaged: %v; verify's damage: %v", off, x, reported, rep.Damage)
		}
		if reported {
			damaged++
		} else {
			harmless++
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d flips in the last %d bytes of the pack: %d reported damaged, %d harmless (the commit marker's bytes, or a flip the record still checks with), 0 silently missing",
		flips, size-spans[len(spans)-2][0], damaged, harmless)
}

// TestPackFormatV3: the packs of a store of format version 3 (no commit
// markers) still open: every acknowledged artifact reads, the config is
// upgraded to the current version, and appends go on. Damage to the last
// record of such a pack is the old rule's: taken for a torn write and
// dropped unreported (SPECS.md §6.4, "Recovery"), while damage with a
// record after it is recorded as usual.
func TestPackFormatV3(t *testing.T) {
	// Not parallel: it sets formatV3Packs, which every pack append reads.
	ctx := context.Background()
	formatV3Packs = true
	clone, arts, refs, spans := killedBatch(t)
	formatV3Packs = false
	files := memFiles{}
	snapshotFS(t, clone, "store", files)
	const pack = "store/packs/000001.pack"
	size := int64(len(files[pack]))
	if size != spans[len(spans)-1][1] {
		t.Fatalf("a version 3 pack of %d bytes, its last record ends at %d: want no commit marker", size, spans[len(spans)-1][1])
	}
	for _, c := range []struct {
		name              string
		off               int64 // byte damaged, or -1
		recovered, broken int
	}{
		{"whole", -1, 40, 0},
		{"a middle record", spans[20][0] + 500, 39, 1},
		{"the last record", spans[39][0] + 500, 39, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := restoreFS(t, files, pack, max(c.off, 0), map[bool]byte{true: 0, false: 0x5a}[c.off < 0])
			s, err := Open("store", &Options{FS: fs})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.packRecovered != c.recovered || s.packDamaged != c.broken {
				t.Fatalf("Open indexed %d records, %d damaged regions; want %d and %d", s.packRecovered, s.packDamaged, c.recovered, c.broken)
			}
			cfg, err := decodeConfig(rawGet(t, s, configKey()))
			if err != nil || cfg.Version != formatVersion {
				t.Fatalf("config after Open: %+v, %v; want version %d", cfg, err, formatVersion)
			}
			if c.off < 0 {
				for i, ref := range refs {
					if got := get(t, s, ref); !sameArtifact(got, arts[i]) {
						t.Fatalf("artifact %d differs", i)
					}
				}
			}
			if c.name == "the last record" {
				if _, err := s.Stat(ctx, refs[39]); !errors.Is(err, asl.ErrNotFound) || errors.Is(err, asl.ErrIntegrity) {
					t.Fatalf("the last record's artifact: %v; want not found (the version 3 rule)", err)
				}
			}
			// Appends go on, with commit markers.
			more := asl.Untagged([]byte("after the upgrade"))
			ref := put(t, s, asl.HashSHA256, more)
			if got := get(t, s, ref); !sameArtifact(got, more) {
				t.Fatal("artifact put after the upgrade differs")
			}
		})
	}
}
