package s3store_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/internal/longtest"
)

// TestBitrotFlips flips one byte at a time in MinIO's stored files (the
// xl.meta of an object inlined there, the xl.meta of an object kept in part
// files, a part file), reads the artifact back through the store, puts the
// byte back, and counts each outcome per kind (issue 20, "Keep the figures
// honest"): the same bytes (harmless), ERR_INTEGRITY (detected), not found
// (lost), other bytes (wrong) or any other error (wrong class); healed
// counts the flips MinIO undid in its file itself during the read. Lost
// and wrong must be 0; a wrong class is a failure too, since the user
// could not tell bitrot from a network fault. AMDUAT_FLIPS=N runs N flips
// spread over the kinds (as asl/pebblestore's flip tests); the default is
// 1 per kind (10 with AMDUAT_LONG=1): a damaged xl.meta is reported at
// once, damaged data (MinIO's SlowDownRead) after about 3 s, the wait that
// tells it from a drive briefly unable to serve (retry.go, unreadableFor;
// SPECS.md §6.7, "Retries").
func TestBitrotFlips(t *testing.T) {
	m := sharedServer(t) // its own bucket: the flips touch no other test's files
	st := create(t, m, "flips", options(m))
	ctx := t.Context()
	type object struct {
		kind string
		art  asl.Artifact
		ref  asl.Reference
		file string
	}
	var objs []object
	sizes := []int{1000, 300 << 10}
	for i, size := range sizes {
		a := asl.Untagged(gen(uint64(40+i), size))
		ref, err := asl.PutArtifact(ctx, st, asl.HashSHA256, a)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(m.DataDir(), "flips", st.ArtifactKey(ref))
		var files []string
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files = append(files, p)
			}
			return nil
		})
		sort.Strings(files)
		for _, f := range files {
			kind := "part"
			if strings.HasSuffix(f, "xl.meta") {
				kind = "xl.meta-inline"
				if len(files) > 1 {
					kind = "xl.meta-parts"
				}
			}
			objs = append(objs, object{kind, a, ref, f})
		}
	}
	kinds := map[string]bool{}
	for _, o := range objs {
		kinds[o.kind] = true
	}
	if len(kinds) != 3 {
		t.Fatalf("MinIO's layout has kinds %v, want xl.meta-inline, xl.meta-parts and part", kinds)
	}
	n := len(kinds)
	if longtest.Enabled() {
		n = 10 * len(kinds)
	}
	if v := os.Getenv("AMDUAT_FLIPS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("AMDUAT_FLIPS=%q: want a positive number", v)
		}
	}
	type counts struct {
		flips, harmless, detected, healed, lost, wrong, wrongClass int
		detectTime, slowest                                        time.Duration
	}
	table := map[string]*counts{}
	rng := uint64(0x9e3779b97f4a7c15)
	next := func() uint64 { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng }
	for i := range n {
		o := objs[i%len(objs)]
		c := table[o.kind]
		if c == nil {
			c = &counts{}
			table[o.kind] = c
		}
		b, err := os.ReadFile(o.file)
		if err != nil {
			t.Fatal(err)
		}
		orig := bytes.Clone(b)
		at := int(next() % uint64(len(b)))
		bit := byte(1) << (next() % 8)
		b[at] ^= bit
		if err := os.WriteFile(o.file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		got, err := asl.Get(ctx, st, o.ref, 0)
		took := time.Since(began)
		if now, rerr := os.ReadFile(o.file); rerr == nil && bytes.Equal(now, orig) {
			c.healed++
		}
		c.flips++
		switch {
		case err == nil && bytes.Equal(got.Bytes, o.art.Bytes):
			c.harmless++
		case err == nil:
			c.wrong++
			t.Errorf("%s offset %d bit %#x: wrong bytes", o.kind, at, bit)
		case errors.Is(err, asl.ErrIntegrity):
			c.detected++
			c.detectTime += took
			c.slowest = max(c.slowest, took)
		case errors.Is(err, asl.ErrNotFound):
			c.lost++
			t.Errorf("%s offset %d bit %#x: reads as missing: %v", o.kind, at, bit, err)
		default:
			c.wrongClass++
			t.Errorf("%s offset %d bit %#x: %v, want ERR_INTEGRITY", o.kind, at, bit, err)
		}
		b[at] ^= bit
		if err := os.WriteFile(o.file, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	names := make([]string, 0, len(table))
	for k := range table {
		names = append(names, k)
	}
	sort.Strings(names)
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-16s %6s %9s %9s %7s %5s %6s %12s %12s %9s\n", "kind", "flips", "harmless", "detected", "healed", "lost", "wrong", "wrong class", "mean detect", "slowest")
	for _, k := range names {
		c := table[k]
		var mean time.Duration
		if c.detected > 0 {
			mean = c.detectTime / time.Duration(c.detected)
		}
		fmt.Fprintf(&sb, "%-16s %6d %9d %9d %7d %5d %6d %12d %12v %9v\n", k, c.flips, c.harmless, c.detected, c.healed, c.lost, c.wrong, c.wrongClass, mean.Round(time.Millisecond), c.slowest.Round(time.Millisecond))
	}
	t.Logf("MinIO flips:\n%s", sb.String())
}
