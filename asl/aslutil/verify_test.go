package aslutil_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/aslutil"
	"github.com/amduat/amduat/asl/memstore"
)

// fill stores n artifacts of varied sizes, tags and hashes and returns
// their references in ReferenceBytes order and their total payload size.
func fill(t testing.TB, s *memstore.Store, n int) ([]asl.Reference, int64) {
	t.Helper()
	var refs []asl.Reference
	var total int64
	for i := range n {
		b := append([]byte(fmt.Sprint(i)), bytes.Repeat([]byte{byte(i)}, i%97)...)
		a := asl.Untagged(b)
		if i%3 == 0 {
			a = asl.Tagged(asl.TypeTag(i), b)
		}
		id := asl.HashSHA256
		if i%4 == 0 {
			id = asl.HashBLAKE3
		}
		ref, err := asl.PutArtifact(context.Background(), s, id, a)
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref)
		total += int64(len(b))
	}
	sortRefs(refs)
	return refs, total
}

func sortRefs(refs []asl.Reference) {
	sort.Slice(refs, func(i, j int) bool { return bytes.Compare(refs[i].Bytes(), refs[j].Bytes()) < 0 })
}

// recorder remembers which references were fetched.
type recorder struct {
	aslutil.VerifyStore
	mu      sync.Mutex
	fetched []asl.Reference
}

func (r *recorder) Fetch(ctx context.Context, ref asl.Reference) (io.ReadCloser, asl.Header, error) {
	r.mu.Lock()
	r.fetched = append(r.fetched, ref)
	r.mu.Unlock()
	return r.VerifyStore.Fetch(ctx, ref)
}

func (r *recorder) sorted() []asl.Reference {
	out := slices.Clone(r.fetched)
	sortRefs(out)
	return out
}

func TestVerifyCleanStore(t *testing.T) {
	s := memstore.New()
	refs, total := fill(t, s, 300)
	var calls []aslutil.Progress
	rec := &recorder{VerifyStore: s}
	rep, err := aslutil.Verify(context.Background(), rec, aslutil.VerifyOptions{Workers: 8}, func(p aslutil.Progress) { calls = append(calls, p) })
	if err != nil {
		t.Fatal(err)
	}
	if rep.Stored != 300 || rep.Selected != 300 || rep.Checked != 300 || rep.Bytes != total || len(rep.Failures) != 0 {
		t.Fatalf("report %+v, want 300 clean artifacts of %d bytes", rep, total)
	}
	if !slices.Equal(rec.sorted(), refs) {
		t.Fatal("not every artifact was fetched exactly once")
	}
	if len(calls) != 300 {
		t.Fatalf("progress called %d times", len(calls))
	}
	last := calls[len(calls)-1]
	if last.Checked != 300 || last.TotalArtifacts != 300 || last.Bytes != total || last.TotalBytes != total {
		t.Fatalf("final progress %+v", last)
	}
	for i := 1; i < len(calls); i++ {
		if calls[i].Checked != calls[i-1].Checked+1 || calls[i].Bytes < calls[i-1].Bytes {
			t.Fatalf("progress not monotonic at %d: %+v after %+v", i, calls[i], calls[i-1])
		}
	}
}

func TestVerifyFindsCorruption(t *testing.T) {
	s := memstore.New()
	refs, _ := fill(t, s, 100)
	damaged := []asl.Reference{refs[70], refs[3], refs[41]}
	for _, r := range damaged {
		if !s.Corrupt(r, []byte("not the original bytes")) {
			t.Fatal("corrupt: missing ref")
		}
	}
	sortRefs(damaged)
	rep, err := aslutil.Verify(context.Background(), s, aslutil.VerifyOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Checked != 100 || len(rep.Failures) != 3 || rep.IntegrityFailures() != 3 {
		t.Fatalf("report %+v", rep)
	}
	for i, f := range rep.Failures {
		if f.Ref != damaged[i] || !f.Integrity || !errors.Is(f.Err, asl.ErrIntegrity) {
			t.Errorf("failure %d = %v %v %t, want %v integrity", i, f.Ref, f.Err, f.Integrity, damaged[i])
		}
	}
}

// fault wraps a store and misbehaves for one reference.
type fault struct {
	aslutil.VerifyStore
	ref  asl.Reference
	mode string
}

func (f fault) Fetch(ctx context.Context, ref asl.Reference) (io.ReadCloser, asl.Header, error) {
	rc, hdr, err := f.VerifyStore.Fetch(ctx, ref)
	if ref != f.ref || err != nil {
		return rc, hdr, err
	}
	switch f.mode {
	case "io":
		rc.Close()
		return nil, asl.Header{}, fmt.Errorf("%s: disk on fire", ref)
	case "read-io":
		return io.NopCloser(io.MultiReader(io.LimitReader(rc, 1), errReader{})), hdr, nil
	case "not-found":
		return nil, asl.Header{}, fmt.Errorf("%s: %w", ref, asl.ErrNotFound)
	case "header":
		hdr.Size++
		return rc, hdr, nil
	case "short":
		return io.NopCloser(io.LimitReader(rc, int64(hdr.Size)-1)), hdr, nil
	case "long":
		return io.NopCloser(io.MultiReader(rc, strings.NewReader("x"))), hdr, nil
	case "wrong":
		b, _ := io.ReadAll(rc)
		b[0] ^= 1
		return io.NopCloser(bytes.NewReader(b)), hdr, nil
	}
	panic(f.mode)
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("read failed") }

func TestVerifyClassifiesFailures(t *testing.T) {
	for _, tt := range []struct {
		mode      string
		integrity bool
	}{
		{"io", false}, {"read-io", false}, {"not-found", true}, {"header", true},
		{"short", true}, {"long", true}, {"wrong", true},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			s := memstore.New()
			refs, _ := fill(t, s, 20)
			var target asl.Reference
			for _, r := range refs {
				if info, _ := s.Stat(context.Background(), r); info.Size > 2 {
					target = r
					break
				}
			}
			rep, err := aslutil.Verify(context.Background(), fault{s, target, tt.mode}, aslutil.VerifyOptions{Workers: 3}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Checked != 20 || len(rep.Failures) != 1 {
				t.Fatalf("report %+v", rep)
			}
			f := rep.Failures[0]
			if f.Ref != target || f.Integrity != tt.integrity || strings.Contains(f.Err.Error(), "\n") {
				t.Fatalf("failure %v %q integrity=%t, want %v integrity=%t", f.Ref, f.Err, f.Integrity, target, tt.integrity)
			}
			if got := rep.IntegrityFailures(); got != map[bool]int{true: 1, false: 0}[tt.integrity] {
				t.Fatalf("IntegrityFailures = %d", got)
			}
		})
	}
}

func TestVerifyPercentSample(t *testing.T) {
	s := memstore.New()
	refs, _ := fill(t, s, 2000)
	want := func(seed string, pct float64) []asl.Reference {
		var out []asl.Reference
		limit := uint64(pct / 100 * (1 << 64))
		for _, r := range refs {
			if aslutil.SampleKey(seed, r) < limit {
				out = append(out, r)
			}
		}
		return out
	}
	run := func(smp aslutil.Sample) []asl.Reference {
		rec := &recorder{VerifyStore: s}
		rep, err := aslutil.Verify(context.Background(), rec, aslutil.VerifyOptions{Sample: &smp}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Stored != 2000 || rep.Selected != int64(len(rec.fetched)) || len(rep.Failures) != 0 {
			t.Fatalf("report %+v", rep)
		}
		return rec.sorted()
	}
	a := run(aslutil.Sample{Percent: 10})
	if !slices.Equal(a, want("", 10)) {
		t.Fatal("10% sample differs from the documented rule")
	}
	// 2000 × 10%: the fixed data set gives a fixed count; it must be near 200.
	if len(a) < 140 || len(a) > 260 {
		t.Fatalf("10%% sample has %d artifacts", len(a))
	}
	if !slices.Equal(run(aslutil.Sample{Percent: 10}), a) {
		t.Fatal("same sample selected different artifacts")
	}
	b := run(aslutil.Sample{Percent: 10, Seed: "monday"})
	if slices.Equal(a, b) || !slices.Equal(b, want("monday", 10)) {
		t.Fatal("seed did not change the selection as documented")
	}
	if got := run(aslutil.Sample{Percent: 100}); !slices.Equal(got, refs) {
		t.Fatalf("100%% selected %d of %d", len(got), len(refs))
	}
}

// TestVerifyPercentSampleAtLeastOne: a percentage that selects nothing
// from a small store checks the artifact with the smallest sample key.
func TestVerifyPercentSampleAtLeastOne(t *testing.T) {
	s := memstore.New()
	refs, _ := fill(t, s, 6)
	smallest := refs[0]
	for _, r := range refs {
		if aslutil.SampleKey("", r) < aslutil.SampleKey("", smallest) {
			smallest = r
		}
	}
	smp := aslutil.Sample{Percent: 0.001}
	rec := &recorder{VerifyStore: s}
	rep, err := aslutil.Verify(context.Background(), rec, aslutil.VerifyOptions{Sample: &smp}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Stored != 6 || rep.Checked != 1 || !slices.Equal(rec.sorted(), []asl.Reference{smallest}) {
		t.Fatalf("report %+v, checked %v, want only %s", rep, rec.sorted(), smallest)
	}
	empty := memstore.New()
	rep, err = aslutil.Verify(context.Background(), empty, aslutil.VerifyOptions{Sample: &smp}, nil)
	if err != nil || rep.Checked != 0 {
		t.Fatalf("empty store: %+v %v", rep, err)
	}
}

func TestVerifyCountSample(t *testing.T) {
	s := memstore.New()
	refs, _ := fill(t, s, 500)
	byKey := slices.Clone(refs)
	sort.Slice(byKey, func(i, j int) bool { return aslutil.SampleKey("", byKey[i]) < aslutil.SampleKey("", byKey[j]) })
	want := slices.Clone(byKey[:37])
	sortRefs(want)

	var last aslutil.Progress
	rec := &recorder{VerifyStore: s}
	rep, err := aslutil.Verify(context.Background(), rec, aslutil.VerifyOptions{Sample: &aslutil.Sample{Count: 37}}, func(p aslutil.Progress) { last = p })
	if err != nil {
		t.Fatal(err)
	}
	if rep.Stored != 500 || rep.Selected != 37 || rep.Checked != 37 || last.TotalArtifacts != 37 {
		t.Fatalf("report %+v progress %+v", rep, last)
	}
	if !slices.Equal(rec.sorted(), want) {
		t.Fatal("count sample is not the 37 smallest sample keys")
	}
	rep, err = aslutil.Verify(context.Background(), s, aslutil.VerifyOptions{Sample: &aslutil.Sample{Count: 9999}}, nil)
	if err != nil || rep.Checked != 500 {
		t.Fatalf("count above store size: %+v %v", rep, err)
	}
}

// enumFail stops its walk after 5 artifacts with an I/O error.
type enumFail struct{ aslutil.VerifyStore }

var errEnumIO = errors.New("disk read failed")

func (e enumFail) Enumerate(ctx context.Context, after asl.Reference, fn func(asl.Info) error) error {
	n := 0
	return e.VerifyStore.Enumerate(ctx, after, func(in asl.Info) error {
		if n++; n > 5 {
			return errEnumIO
		}
		return fn(in)
	})
}

// enumDamage skips the 6th and 7th artifacts as if their index records
// were damaged, walks on, and reports both at the end, as
// pebblestore.Store.Enumerate does.
type enumDamage struct{ aslutil.VerifyStore }

func (e enumDamage) Enumerate(ctx context.Context, after asl.Reference, fn func(asl.Info) error) error {
	n := 0
	var bad []error
	err := e.VerifyStore.Enumerate(ctx, after, func(in asl.Info) error {
		if n++; n == 6 || n == 7 {
			bad = append(bad, fmt.Errorf("%s: index record damaged: %w", in.Ref, asl.ErrIntegrity))
			return nil
		}
		return fn(in)
	})
	if err != nil {
		return err
	}
	return fmt.Errorf("enumerate: %w", errors.Join(bad...))
}

func TestVerifyWalkErrors(t *testing.T) {
	s := memstore.New()
	fill(t, s, 50)
	for _, opts := range []aslutil.VerifyOptions{{}, {Sample: &aslutil.Sample{Count: 3}}, {Sample: &aslutil.Sample{Percent: 50}}} {
		_, err := aslutil.Verify(context.Background(), enumFail{s}, opts, func(aslutil.Progress) {})
		if !errors.Is(err, errEnumIO) {
			t.Errorf("%+v: err = %v, want the enumeration's I/O error", opts, err)
		}
		// Damage the walk went past is reported, and the rest verified.
		rep, err := aslutil.Verify(context.Background(), enumDamage{s}, opts, func(aslutil.Progress) {})
		if err != nil || len(rep.Damage) != 2 || !errors.Is(rep.Damage[1], asl.ErrIntegrity) {
			t.Errorf("%+v: damaged walk: %v, damage %v", opts, err, rep.Damage)
		}
		if opts.Sample == nil && (rep.Checked != 48 || rep.Stored != 48) {
			t.Errorf("damaged walk checked %d of %d, want 48 of 48", rep.Checked, rep.Stored)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := aslutil.Verify(ctx, s, aslutil.VerifyOptions{}, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: err = %v", err)
	}
	if _, err := aslutil.Verify(context.Background(), s, aslutil.VerifyOptions{Sample: &aslutil.Sample{Percent: 0}}, nil); err == nil {
		t.Fatal("0% accepted")
	}
}

// Cancelling in the middle stops the walk and reports the cancellation.
func TestVerifyCancelMidway(t *testing.T) {
	s := memstore.New()
	fill(t, s, 400)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rep, err := aslutil.Verify(ctx, s, aslutil.VerifyOptions{Workers: 4}, func(p aslutil.Progress) {
		if p.Checked == 10 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) || rep.Checked >= 400 || len(rep.Failures) != 0 {
		t.Fatalf("rep %+v err %v", rep, err)
	}
}

func TestParseSample(t *testing.T) {
	good := map[string]aslutil.Sample{
		"1": {Count: 1}, "250": {Count: 250}, "10%": {Percent: 10}, "0.5%": {Percent: 0.5}, "100%": {Percent: 100},
	}
	for in, want := range good {
		got, err := aslutil.ParseSample(in)
		if err != nil || got != want {
			t.Errorf("ParseSample(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if got.String() != in {
			t.Errorf("String() = %q, want %q", got.String(), in)
		}
	}
	for _, in := range []string{"", "0", "-1", "+3", "x", "0%", "100.1%", "-5%", "%", "nan%", "inf%", "1e1%", "0x10", "0x1p3%", "5 %", "1_0"} {
		if got, err := aslutil.ParseSample(in); err == nil {
			t.Errorf("ParseSample(%q) = %+v, want error", in, got)
		}
	}
}

func FuzzParseSample(f *testing.F) {
	for _, s := range []string{"1", "10%", "0.5%", "abc", "1e3%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		smp, err := aslutil.ParseSample(s)
		if err != nil {
			return
		}
		if (smp.Count > 0) == (smp.Percent > 0) || smp.Percent > 100 || smp.Count < 0 {
			t.Fatalf("%q parsed to invalid %+v", s, smp)
		}
		back, err := aslutil.ParseSample(smp.String())
		if err != nil || back != smp {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", s, smp, smp.String(), back, err)
		}
	})
}
