package pebblestore

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
)

func helloRef() asl.Reference { return asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("hello"))) }

// journalSamples are one record of each kind, as a store writes them.
func journalSamples() []metaRec {
	ref := helloRef().Bytes()
	other := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("world"))).Bytes()
	return []metaRec{
		{Kind: metaPin, Seq: 1, Name: "docs", New: ref, Time: 1700000000000000000, Actor: "local"},
		{Kind: metaPin, Seq: 2, Name: "docs", Old: ref, New: other, Time: 1700000000000000001},
		{Kind: metaPin, Seq: 3, Name: "docs", Old: other, Time: 1700000000000000002, Actor: "ci"},
		{Kind: metaSet, Space: "surf.config", Key: []byte("cache-salt"), Value: bytes.Repeat([]byte{7}, 32)},
		{Kind: metaSet, Space: "surf.log", Key: []byte{1, 2, 3}},
		{Kind: metaDel, Space: "surf.log", Key: []byte{1, 2, 3}},
		{Kind: metaTomb, Ref: ref, Pack: 3, Offset: 48},
	}
}

// journalBytes frames recs as a journal of generation gen.
func journalBytes(t testing.TB, gen uint64, recs []metaRec) []byte {
	t.Helper()
	b := appendJournalHead(nil, gen)
	for _, r := range recs {
		body, err := encodeMetaRec(r)
		if err != nil {
			t.Fatal(err)
		}
		b = appendJournalRecord(b, gen, uint64(len(b)), body)
	}
	return b
}

func TestJournalRoundTrip(t *testing.T) {
	t.Parallel()
	recs := journalSamples()
	b := journalBytes(t, 7, recs)
	sc, err := scanJournal(b)
	if err != nil {
		t.Fatal(err)
	}
	if sc.gen != 7 || len(sc.damage) != 0 || sc.end != uint64(len(b)) || len(sc.recs) != len(recs) {
		t.Fatalf("scan = gen %d, %d records, damage %v, end %d of %d", sc.gen, len(sc.recs), sc.damage, sc.end, len(b))
	}
	for i, e := range sc.recs {
		if !reflect.DeepEqual(e.rec, recs[i]) {
			t.Errorf("record %d = %+v, want %+v", i, e.rec, recs[i])
		}
	}
}

// TestJournalRejects: every rule of SPECS.md §6.4 "Metadata journal" that a
// body or a frame can break is ErrIntegrity.
func TestJournalRejects(t *testing.T) {
	t.Parallel()
	ref := helloRef().Bytes()
	bodies := []struct {
		name string
		rec  metaRec
	}{
		{"unknown kind", metaRec{Kind: 9}},
		{"kind 0", metaRec{}},
		{"set in a derived space", metaRec{Kind: metaSet, Space: "surf.trace", Key: []byte{1}}},
		{"set without space", metaRec{Kind: metaSet, Key: []byte{1}}},
		{"set with a pin field", metaRec{Kind: metaSet, Space: "surf.log", Key: []byte{1}, Seq: 1}},
		{"delete with a value", metaRec{Kind: metaDel, Space: "surf.log", Key: []byte{1}, Value: []byte{1}}},
		{"pin seq 0", metaRec{Kind: metaPin, Name: "a", New: ref}},
		{"pin without name", metaRec{Kind: metaPin, Seq: 1, New: ref}},
		{"pin name with a control character", metaRec{Kind: metaPin, Seq: 1, Name: "a\nb", New: ref}},
		{"pin changes nothing", metaRec{Kind: metaPin, Seq: 1, Name: "a", Old: ref, New: ref}},
		{"pin names neither", metaRec{Kind: metaPin, Seq: 1, Name: "a"}},
		{"pin new is no reference", metaRec{Kind: metaPin, Seq: 1, Name: "a", New: []byte{0, 1, 2}}},
		{"pin with a tombstone field", metaRec{Kind: metaPin, Seq: 1, Name: "a", New: ref, Pack: 1}},
		{"tombstone pack 0", metaRec{Kind: metaTomb, Ref: ref, Offset: 48}},
		{"tombstone offset in the magic", metaRec{Kind: metaTomb, Ref: ref, Pack: 1, Offset: 7}},
		{"tombstone without reference", metaRec{Kind: metaTomb, Pack: 1, Offset: 48}},
		{"tombstone with a space", metaRec{Kind: metaTomb, Ref: ref, Pack: 1, Offset: 48, Space: "surf.log"}},
	}
	for _, c := range bodies {
		body, err := encMode.Marshal(c.rec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeMetaRec(body); !isIntegrity(err) {
			t.Errorf("%s: decode = %v, want ErrIntegrity", c.name, err)
		}
		if _, err := encodeMetaRec(c.rec); err == nil {
			t.Errorf("%s: encode accepted it", c.name)
		}
	}
	good, err := encodeMetaRec(journalSamples()[0])
	if err != nil {
		t.Fatal(err)
	}
	raw := [][]byte{
		append(bytes.Clone(good), 0),                  // trailing byte
		{0xa1, 0x01, 0x18, 0x03},                      // kind 3 not in shortest form
		{0xbf, 0x01, 0x03, 0xff},                      // indefinite-length map
		{0xa2, 0x01, 0x04, 0x01, 0x04},                // duplicate key
		{0xa2, 0x01, 0x04, 0x18, 0x63, 0x01},          // unknown key 99
		{0xa2, 0x0b, 0x41, 0x00, 0x01, 0x04},          // keys out of order
		{0xa1, 0x01, 0x03, 0x00},                      // trailing after a complete map (and pin fields missing)
		{},                                            // empty
		{0xa2, 0x01, 0x01, 0x02, 0x68, 's', 'u', 'r'}, // truncated
	}
	for i, b := range raw {
		if _, err := decodeMetaRec(b); !isIntegrity(err) {
			t.Errorf("raw body %d (%x): decode = %v, want ErrIntegrity", i, b, err)
		}
	}
	// Frames.
	j := journalBytes(t, 1, journalSamples()[:1])
	frame := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(j)) }
	frames := []struct {
		name string
		b    []byte
		torn bool
	}{
		{"crc", frame(func(b []byte) []byte { b[journalHead+4] ^= 1; return b }), false},
		{"body byte", frame(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), false},
		{"length 0", frame(func(b []byte) []byte { copy(b[journalHead:], []byte{0, 0, 0, 0}); return b }), false},
		{"length past the limit", frame(func(b []byte) []byte { copy(b[journalHead:], []byte{0, 1, 0, 1}); return b }), false},
		{"length past the end", frame(func(b []byte) []byte { b[journalHead+3]++; return b }), true},
		{"header cut", j[:journalHead+5], true},
		{"body cut", j[:len(j)-1], true},
		{"other generation", frame(func(b []byte) []byte { b[15] = 2; return b }), false},
	}
	for _, c := range frames {
		_, _, torn, err := journalRecordAt(c.b, beUint64(c.b[8:16]), journalHead)
		if c.name == "other generation" {
			// The frame reads as generation 2, its CRC was written for 1.
			_, _, torn, err = journalRecordAt(c.b, 2, journalHead)
		}
		if !isIntegrity(err) || torn != c.torn {
			t.Errorf("frame %s: err %v torn %v, want ErrIntegrity torn %v", c.name, err, torn, c.torn)
		}
		sc, serr := scanJournal(c.b)
		if serr != nil || len(sc.recs) != 0 || len(sc.damage) != 1 || !sc.tail {
			t.Errorf("frame %s: scan = %+v, %v", c.name, sc, serr)
		}
	}
	if _, err := scanJournal(j[:journalHead-1]); !isIntegrity(err) {
		t.Errorf("short head: %v", err)
	}
	bad := bytes.Clone(j)
	bad[0] ^= 1
	if _, err := scanJournal(bad); !isIntegrity(err) {
		t.Errorf("bad magic: %v", err)
	}
}

// TestJournalResync: a damaged record in the middle is skipped and the
// records after it are found; damage at the end is a tail.
func TestJournalResync(t *testing.T) {
	t.Parallel()
	recs := journalSamples()
	j := journalBytes(t, 1, recs)
	sc, _ := scanJournal(j)
	for i, e := range sc.recs {
		b := bytes.Clone(j)
		end := uint64(len(j))
		if i+1 < len(sc.recs) {
			end = sc.recs[i+1].off
		}
		b[e.off+(end-e.off)/2] ^= 0x40
		got, err := scanJournal(b)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.recs) != len(recs)-1 || len(got.damage) != 1 {
			t.Fatalf("record %d damaged: %d records, damage %v", i, len(got.recs), got.damage)
		}
		d := got.damage[0]
		if d.from != e.off || d.to != end || got.tail != (i == len(recs)-1) {
			t.Errorf("record %d damaged: region [%d, %d) tail %v, want [%d, %d)", i, d.from, d.to, got.tail, e.off, end)
		}
	}
}

// TestJournalGolden holds the worked example of SPECS.md §6.4 ("Metadata
// journal") to testdata/journal.golden.
func TestJournalGolden(t *testing.T) {
	t.Parallel()
	recs := journalSamples()
	j := journalBytes(t, 1, []metaRec{recs[0], recs[6]})
	var sb strings.Builder
	fmt.Fprintf(&sb, "journal head (generation 1)\n%s\n\n", hex.EncodeToString(j[:journalHead]))
	sc, err := scanJournal(j)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range sc.recs {
		end := uint64(len(j))
		if i+1 < len(sc.recs) {
			end = sc.recs[i+1].off
		}
		fmt.Fprintf(&sb, "record at %d: length, crc\n%s\nbody\n%s\n\n", e.off, hex.EncodeToString(j[e.off:e.off+8]), hex.EncodeToString(j[e.off+8:end]))
	}
	fmt.Fprintf(&sb, "journal watermark key\n%s\n\njournal watermark value (generation 1, end %d)\n%s\n\npin history key (seq 1)\n%s\n",
		hex.EncodeToString(journalWMKey()), len(j), hex.EncodeToString(appendCBOR(nil, []uint64{1, uint64(len(j))})), hex.EncodeToString(pinLogKey(1)))
	const path = "testdata/journal.golden"
	if *update {
		if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != sb.String() {
		t.Fatalf("journal records differ from %s (run with -update after an intended change):\n%s", path, sb.String())
	}
}

// FuzzJournal: a hostile journal file never panics the scan, every record
// it accepts re-encodes to its body, and regions never overlap records.
func FuzzJournal(f *testing.F) {
	recs := journalSamples()
	j := journalBytes(f, 1, recs)
	f.Add(j)
	f.Add(j[:len(j)-3])
	b := bytes.Clone(j)
	b[40] ^= 0xff
	f.Add(b)
	f.Add(appendJournalHead(nil, 0))
	f.Add([]byte("amdjrnl"))
	f.Fuzz(func(t *testing.T, b []byte) {
		sc, err := scanJournal(b)
		if err != nil {
			if !isIntegrity(err) {
				t.Fatalf("error does not wrap ErrIntegrity: %v", err)
			}
			return
		}
		prev := uint64(journalHead)
		for _, e := range sc.recs {
			if e.off < prev {
				t.Fatalf("record at %d before %d", e.off, prev)
			}
			body, next, _, err := journalRecordAt(b, sc.gen, e.off)
			if err != nil {
				t.Fatalf("accepted record at %d does not check: %v", e.off, err)
			}
			again, err := encodeMetaRec(e.rec)
			if err != nil || !bytes.Equal(again, body) {
				t.Fatalf("record at %d re-encodes to %x (%v), body %x", e.off, again, err, body)
			}
			prev = next
		}
		for _, d := range sc.damage {
			if d.from >= d.to || !isIntegrity(d.err) {
				t.Fatalf("damage region %+v", d)
			}
		}
	})
}
