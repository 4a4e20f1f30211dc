package asl_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/internal/longtest"
	"github.com/amduat/amduat/internal/testrand"
)

// countingFetcher counts fetches.
type countingFetcher struct {
	asl.Fetcher
	n int
}

func (c *countingFetcher) Fetch(ctx context.Context, ref asl.Reference) (io.ReadCloser, asl.Header, error) {
	c.n++
	return c.Fetcher.Fetch(ctx, ref)
}

// TestRopeModel builds random ropes by concatenation and slicing over
// in-memory and stored leaves and checks every way of reading them against
// the same operations on byte slices: 1,000 ropes in the default run,
// 3,000 with AMDUAT_LONG=1 (internal/longtest).
func TestRopeModel(t *testing.T) {
	ropes := longtest.Logf(t, "ropes", 1000, 3000)
	ctx := context.Background()
	st := memstore.New()
	pcg := rand.NewPCG(5, 5)
	r := rand.New(pcg)
	type pair struct {
		rope *asl.Rope
		b    []byte
	}
	var pool []pair
	for i := 0; i < 6; i++ {
		b := make([]byte, r.IntN(5000))
		testrand.Fill(pcg, b)
		a := asl.Untagged(b)
		if i%2 == 0 {
			pool = append(pool, pair{asl.NewRope(a), b})
			continue
		}
		ref, err := asl.PutArtifact(ctx, st, asl.HashSHA256, a)
		if err != nil {
			t.Fatal(err)
		}
		pool = append(pool, pair{asl.StoredRope(st, ref, a.Header()), b})
	}
	for i := 0; i < ropes; i++ {
		var p pair
		if r.IntN(2) == 0 {
			var parts []*asl.Rope
			var b []byte
			for k := 1 + r.IntN(5); k > 0; k-- {
				q := pool[r.IntN(len(pool))]
				parts = append(parts, q.rope)
				b = append(b, q.b...)
			}
			rope, err := asl.ConcatRopes(parts...)
			if err != nil {
				t.Fatal(err)
			}
			p = pair{rope, b}
		} else {
			q := pool[r.IntN(len(pool))]
			off := r.Uint64N(uint64(len(q.b)) + 1)
			n := r.Uint64N(uint64(len(q.b)) - off + 1)
			rope, err := q.rope.Slice(off, n)
			if err != nil {
				t.Fatal(err)
			}
			p = pair{rope, q.b[off : off+n]}
		}
		if len(p.b) > 200_000 {
			continue
		}
		pool = append(pool, p)
		if p.rope.Size() != uint64(len(p.b)) {
			t.Fatalf("rope %d: size %d, want %d", i, p.rope.Size(), len(p.b))
		}
		got, err := p.rope.Bytes(ctx, 0)
		if err != nil || !bytes.Equal(got, p.b) {
			t.Fatalf("rope %d: Bytes differ (%v)", i, err)
		}
		if i%10 == 0 {
			// Odd-sized reads through Read.
			rc := p.rope.Open(ctx)
			var out []byte
			buf := make([]byte, 1+r.IntN(700))
			for {
				n, err := rc.Read(buf)
				out = append(out, buf[:n]...)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			rc.Close()
			if !bytes.Equal(out, p.b) {
				t.Fatalf("rope %d: Read differs", i)
			}
			ref, err := p.rope.Ref(ctx, asl.HashSHA256)
			if err != nil || ref != asl.MustDerive(asl.HashSHA256, asl.Untagged(p.b)) {
				t.Fatalf("rope %d: Ref %s %v", i, ref, err)
			}
		}
	}
	if _, err := pool[0].rope.Slice(pool[0].rope.Size(), 1); err == nil {
		t.Fatal("a slice past the end was accepted")
	}
}

// TestRopeSequentialRangesShareOneFetch: consecutive ranges of one stored
// artifact in ascending order are read in one fetch; a range before the
// current position starts a new one.
func TestRopeSequentialRangesShareOneFetch(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	b := bytes.Repeat([]byte("0123456789"), 1000)
	ref, err := asl.PutArtifact(ctx, st, asl.HashSHA256, asl.Untagged(b))
	if err != nil {
		t.Fatal(err)
	}
	cf := &countingFetcher{Fetcher: st}
	x := asl.StoredRope(cf, ref, asl.Untagged(b).Header())
	var parts []*asl.Rope
	for off := uint64(0); off+700 <= 10000; off += 1000 {
		s, _ := x.Slice(off, 700)
		parts = append(parts, s, asl.NewRope(asl.Untagged([]byte("|"))))
	}
	c, err := asl.ConcatRopes(parts...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Bytes(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if cf.n != 1 {
		t.Fatalf("%d fetches, want 1", cf.n)
	}
	cf.n = 0
	twice, _ := asl.ConcatRopes(x, x)
	if _, err := twice.Bytes(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if cf.n != 2 {
		t.Fatalf("%d fetches for concat(x, x), want 2", cf.n)
	}
}

// TestRopeReadsVerifyWholeArtifact: a read of a range is refused when the
// stored artifact is damaged anywhere, even outside the range, because the
// read continues to the end for the whole-digest check.
func TestRopeReadsVerifyWholeArtifact(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	b := bytes.Repeat([]byte("a"), 10000)
	ref, err := asl.PutArtifact(ctx, st, asl.HashSHA256, asl.Untagged(b))
	if err != nil {
		t.Fatal(err)
	}
	x := asl.StoredRope(st, ref, asl.Untagged(b).Header())
	head, _ := x.Slice(0, 10)
	damaged := bytes.Clone(b)
	damaged[9999] = 'b'
	st.Corrupt(ref, damaged)
	if _, err := head.Bytes(ctx, 0); !errors.Is(err, asl.ErrIntegrity) {
		t.Fatalf("slice of a damaged artifact: %v, want ErrIntegrity", err)
	}
	if err := head.CopyTo(ctx, io.Discard); !errors.Is(err, asl.ErrIntegrity) {
		t.Fatalf("CopyTo: %v, want ErrIntegrity", err)
	}
	st.Corrupt(ref, b[:9000])
	if _, err := x.Ref(ctx, asl.HashBLAKE3); !errors.Is(err, asl.ErrIntegrity) {
		t.Fatalf("short artifact: %v, want ErrIntegrity", err)
	}
}

func TestRopeBounds(t *testing.T) {
	big := asl.NewRope(asl.Untagged(make([]byte, 40<<10)))
	// Doubling 49 times gives 40 KiB * 2^49 bytes, above 2^64-1.
	cur := big
	var err error
	for i := 0; i < 63 && err == nil; i++ {
		cur, err = asl.ConcatRopes(cur, cur)
	}
	if !errors.Is(err, asl.ErrTooLarge) {
		t.Fatalf("doubling: %v, want ErrTooLarge", err)
	}
	huge, _ := asl.ConcatRopes(big, big)
	if _, err := huge.Bytes(context.Background(), 80<<10-1); !errors.Is(err, asl.ErrTooLarge) {
		t.Fatalf("materialising above the limit: %v", err)
	}
	if _, err := huge.Bytes(context.Background(), math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	tagged := asl.NewRope(asl.Tagged(9, []byte("x")))
	if h := tagged.WithTag(0, false).Header(); h.HasTag || h.Tag != 0 {
		t.Fatalf("untagged header %+v", h)
	}
	if c, _ := asl.ConcatRopes(tagged); c.Header().HasTag {
		t.Fatal("a one-input concatenation kept the tag")
	}
}

// TestRopeConcurrentReads: one rope read, sliced and hashed from many
// goroutines at once (run under -race).
func TestRopeConcurrentReads(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	b := bytes.Repeat([]byte("concurrent"), 3000)
	ref, err := asl.PutArtifact(ctx, st, asl.HashSHA256, asl.Untagged(b))
	if err != nil {
		t.Fatal(err)
	}
	x := asl.StoredRope(st, ref, asl.Untagged(b).Header())
	c, err := asl.ConcatRopes(x, asl.NewRope(asl.Untagged([]byte("!"))), x)
	if err != nil {
		t.Fatal(err)
	}
	want := asl.MustDerive(asl.HashBLAKE3, asl.Untagged(append(append(bytes.Clone(b), '!'), b...)))
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		go func() {
			got, err := c.Ref(ctx, asl.HashBLAKE3)
			if err == nil && got != want {
				err = errors.New("wrong reference")
			}
			if err == nil {
				var s *asl.Rope
				if s, err = c.Slice(uint64(g), 1000); err == nil {
					var out []byte
					if out, err = s.Bytes(ctx, 0); err == nil && !bytes.Equal(out, b[g:g+1000]) {
						err = errors.New("wrong slice")
					}
				}
			}
			errs <- err
		}()
	}
	for g := 0; g < 8; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestRopeCoalescesSmallConcatenations: a concatenation of in-memory ropes
// of at most 64 KiB is one in-memory slice (so a doubling chain of one-byte
// consts is not read one byte per leaf); a larger one, or one reading a
// stored artifact, refers to its parts. The payload is the same either way.
func TestRopeCoalescesSmallConcatenations(t *testing.T) {
	ctx := context.Background()
	cur := asl.NewRope(asl.Untagged([]byte("ab")))
	want := []byte("ab")
	for cur.Size() <= 64<<10 {
		if !cur.InMemory() {
			t.Fatalf("a %d-byte concatenation of in-memory ropes is not one slice", cur.Size())
		}
		slice, err := cur.Slice(1, cur.Size()-1)
		if err != nil {
			t.Fatal(err)
		}
		if cur, err = asl.ConcatRopes(cur, slice); err != nil {
			t.Fatal(err)
		}
		want = append(want, want[1:]...)
	}
	if cur.InMemory() {
		t.Fatalf("a %d-byte concatenation was copied", cur.Size())
	}
	got, err := cur.Bytes(ctx, 0)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("payload differs (%v)", err)
	}
	st := memstore.New()
	ref, err := asl.PutArtifact(ctx, st, asl.HashSHA256, asl.Untagged([]byte("stored")))
	if err != nil {
		t.Fatal(err)
	}
	mixed, err := asl.ConcatRopes(asl.StoredRope(st, ref, asl.Header{Size: 6}), asl.NewRope(asl.Untagged([]byte("!"))))
	if err != nil {
		t.Fatal(err)
	}
	if mixed.InMemory() {
		t.Fatal("a concatenation reading a stored artifact was copied")
	}
	if got, err := mixed.Bytes(ctx, 0); err != nil || string(got) != "stored!" {
		t.Fatalf("mixed payload %q, %v", got, err)
	}
}
