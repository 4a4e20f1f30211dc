package bench

import (
	"context"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
)

const smallSeed = 2

// smallBatch fills arts with the small artifacts first..first+len(arts)-1
// of the deterministic set, backed by buf.
func smallBatch(buf []byte, arts []asl.Artifact, size, first int) {
	for i := range arts {
		p := buf[i*size : (i+1)*size : (i+1)*size]
		FillRandom(p, smallSeed, uint64(first+i))
		arts[i] = asl.Untagged(p)
	}
}

// refHasher derives SHA-256 References with one reused digest state: the
// hash limit of storing an artifact.
type refHasher struct {
	h   hash.Hash
	hdr []byte
	sum []byte
}

func newRefHasher() *refHasher { return &refHasher{h: sha256.New(), hdr: make([]byte, 0, 13)} }

// digest hashes a's ArtifactBytes and returns the digest (valid until the
// next call).
func (r *refHasher) digest(a asl.Artifact) []byte {
	r.h.Reset()
	r.h.Write(a.Header().AppendHeader(r.hdr[:0]))
	r.h.Write(a.Bytes)
	r.sum = r.h.Sum(r.sum[:0])
	return r.sum
}

// hashBatch times deriving the references of arts.
func (r *refHasher) hashBatch(arts []asl.Artifact) time.Duration {
	start := time.Now()
	for _, a := range arts {
		r.digest(a)
	}
	return time.Since(start)
}

// smallPut is one pass of PutBatch over the small artifacts.
type smallPut struct {
	refs             []asl.Reference
	put, hash, plain time.Duration // in PutBatch, hashing, plain append+fdatasync
	rss              *int64
	io               IOCounters
	batches          int
}

// putSmall times batches in groups of about smallGroupBytes of payload and
// at least smallGroupBatches batches, each group one tight run of PutBatch
// calls: with several batches per group, the work a put leaves in the
// background overlaps the next put as in any loop, and only the group's
// last batch waits for it alone.
const (
	smallGroupBytes   = 10 << 20
	smallGroupBatches = 4
)

// groupBatches is how many batches of batch artifacts of size bytes
// putSmall times as one group.
func groupBatches(batch, size int) int {
	return max(smallGroupBatches, smallGroupBytes/(batch*size))
}

// syncer is a store that can wait for work its puts left in the background
// (pebblestore.Store.Sync).
type syncer interface{ Sync() error }

// putSmall stores the n small artifacts in s, batch at a time, in groups
// (see smallGroupBytes). A group's batches are generated first; then its
// PutBatch calls run back to back and, when s is a syncer, Sync ends the
// group: the timed work is everything the puts cost, including what they
// leave to background goroutines (the queued index commits), as a caller
// putting in a loop experiences it. Around each group, untimed for the put:
// the hash limit (SHA-256 of each batch, before) and, with plain set, the
// durability floor (each batch's payload appended to plain and
// fdatasynced, after). Every returned reference is checked against the
// hash.
func putSmall(ctx context.Context, s asl.BatchReceiver, n, size, batch int, plain *os.File) (smallPut, error) {
	group := groupBatches(batch, size)
	buf := make([]byte, group*batch*size)
	arts := make([]asl.Artifact, group*batch)
	rh := newRefHasher()
	r := smallPut{refs: make([]asl.Reference, 0, n)}
	io0 := ReadIO()
	w := StartWindow()
	for first := 0; first < n; first += group * batch {
		k := min(group*batch, n-first)
		smallBatch(buf, arts[:k], size, first)
		for lo := 0; lo < k; lo += batch {
			r.hash += rh.hashBatch(arts[lo:min(lo+batch, k)])
		}
		rs := make([]asl.Reference, 0, k)
		var err error
		t := time.Now()
		phase(ctx, "put", func(ctx context.Context) {
			for lo := 0; lo < k && err == nil; lo += batch {
				hi := min(lo+batch, k)
				var got []asl.Reference
				if got, err = s.PutBatch(ctx, asl.HashSHA256, arts[lo:hi]); err != nil {
					err = fmt.Errorf("PutBatch of artifacts %d..%d: %w", first+lo, first+hi-1, err)
				}
				rs = append(rs, got...)
				r.batches++
			}
			if sy, ok := s.(syncer); ok && err == nil {
				err = sy.Sync()
			}
		})
		r.put += time.Since(t)
		if err != nil {
			return smallPut{}, err
		}
		if plain != nil {
			t = time.Now()
			for lo := 0; lo < k; lo += batch {
				if _, err := plain.Write(buf[lo*size : min(lo+batch, k)*size]); err != nil {
					return smallPut{}, err
				}
				if err := plain.Sync(); err != nil {
					return smallPut{}, err
				}
			}
			r.plain += time.Since(t)
		}
		for i, ref := range rs {
			if string(ref.Digest()) != string(rh.digest(arts[i])) {
				return smallPut{}, fmt.Errorf("PutBatch returned %s for artifact %d, which hashes differently", ref, first+i)
			}
		}
		r.refs = append(r.refs, rs...)
	}
	r.rss, _ = w.Stop()
	r.io = ReadIO().Sub(io0)
	if plain != nil {
		r.io.WChar -= int64(n * size) // the plain file's share
		r.io.WriteBytes -= int64(n * size)
	}
	return r, nil
}

func runSmall(ctx context.Context, e *Env) ([]Row, error) {
	n, size := e.Sizes.SmallCount, e.Sizes.SmallSize
	dir, err := e.tempDir("small")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	s, err := pebblestore.Create(filepath.Join(dir, "store"), nil)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	label := fmt.Sprintf("%d x %d B", n, size)

	e.logf("small: PutBatch %s in batches of %d", label, e.Sizes.SmallBatch)
	plain, err := os.Create(filepath.Join(dir, "plain"))
	if err != nil {
		return nil, err
	}
	defer plain.Close()
	p1, err := putSmall(ctx, s, n, size, e.Sizes.SmallBatch, plain)
	if err != nil {
		return nil, err
	}

	// The same artifacts in bigger batches, into a second fresh store.
	e.logf("small: PutBatch %s in batches of %d, fresh store", label, e.Sizes.SmallBigBatch)
	s2, err := pebblestore.Create(filepath.Join(dir, "store2"), nil)
	if err != nil {
		return nil, err
	}
	defer s2.Close()
	p2, err := putSmall(ctx, s2, n, size, e.Sizes.SmallBigBatch, nil)
	if err != nil {
		return nil, err
	}

	// Get from the first store: every artifact once, in a deterministic
	// shuffled order.
	e.logf("small: random Fetch of %s", label)
	order := rand.New(rand.NewPCG(smallSeed, 0)).Perm(n)
	got := make([]byte, size)
	w := StartWindow()
	io0 := ReadIO()
	start := time.Now()
	phase(ctx, "get", func(ctx context.Context) {
		for _, i := range order {
			if err = fetchAll(ctx, s, p1.refs[i], got); err != nil {
				return
			}
		}
	})
	dGet := time.Since(start)
	ioGet := ReadIO().Sub(io0)
	rssGet, _ := w.Stop()
	if err != nil {
		return nil, err
	}

	// The hash limit again, right after the gets.
	var dHashGet time.Duration
	rh := newRefHasher()
	buf := make([]byte, e.Sizes.SmallBatch*size)
	arts := make([]asl.Artifact, e.Sizes.SmallBatch)
	for first := 0; first < n; first += len(arts) {
		k := min(len(arts), n-first)
		smallBatch(buf, arts[:k], size, first)
		dHashGet += rh.hashBatch(arts[:k])
	}

	putRow := func(name string, p smallPut, batch int) Row {
		return Row{
			Name:     name,
			Figure:   Quantity{perSec(n, p.put), "artifacts/s"},
			Baseline: &Baseline{perSec(n, p.hash), "artifacts/s", "SHA-256 of same ArtifactBytes"},
			Target:   &Target{">= 250,000/s", OnFigure, AtLeast, 250_000},
			PeakRSS:  p.rss,
			Note: fmt.Sprintf("%s random (incompressible) artifacts, PutBatch of %d each (one sync per batch, %d batches: the pack file's fdatasync), fresh store; timed: back-to-back PutBatch calls in groups of %d batches, each group ending with Sync (queued index commits applied and made durable): %s; %s",
				label, batch, p.batches, groupBatches(batch, size), p.put.Round(time.Millisecond), ioText(p.io, int64(n*size), "written")),
		}
	}
	return []Row{
		putRow("small/put-batch", p1, e.Sizes.SmallBatch),
		putRow(fmt.Sprintf("small/put-batch-%d", e.Sizes.SmallBigBatch), p2, e.Sizes.SmallBigBatch),
		{
			Name:     "small/put-vs-fsync",
			Figure:   Quantity{perSec(n, p1.put), "artifacts/s"},
			Baseline: &Baseline{perSec(n, p1.plain), "artifacts/s", "plain file append+fdatasync per batch"},
			PeakRSS:  p1.rss,
			Note: fmt.Sprintf("the batches-of-%d PutBatch calls against appending each batch's payload bytes to a plain file and fdatasyncing it, alternating by groups of %d batches (%s)",
				e.Sizes.SmallBatch, groupBatches(e.Sizes.SmallBatch, size), p1.plain.Round(time.Millisecond)),
		},
		{
			Name:     "small/get-random",
			Figure:   Quantity{perSec(n, dGet), "artifacts/s"},
			Baseline: &Baseline{perSec(n, dHashGet), "artifacts/s", "SHA-256 of same ArtifactBytes"},
			Target:   &Target{">= 150,000/s", OnFigure, AtLeast, 150_000},
			PeakRSS:  rssGet,
			Note: fmt.Sprintf("Fetch + read to EOF of all %d in a shuffled order, one goroutine, each verified against its digest, from the batches-of-%d store right after the puts (no manual compaction); %s; %s, %d read syscalls",
				n, e.Sizes.SmallBatch, dGet.Round(time.Millisecond), ioText(ioGet, int64(n*size), "read"), ioGet.SyscR),
		},
	}, nil
}

// fetchAll fetches ref and reads it to EOF into buf, which must fit it.
func fetchAll(ctx context.Context, s asl.Fetcher, ref asl.Reference, buf []byte) error {
	rc, hdr, err := s.Fetch(ctx, ref)
	if err != nil {
		return err
	}
	defer rc.Close()
	if hdr.Size > uint64(len(buf)) {
		return fmt.Errorf("fetch %s: %d bytes, want at most %d", ref, hdr.Size, len(buf))
	}
	if _, err := io.ReadFull(rc, buf[:hdr.Size]); err != nil {
		return fmt.Errorf("fetch %s: %w", ref, err)
	}
	var one [1]byte
	if n, err := rc.Read(one[:]); n != 0 || err != io.EOF {
		return fmt.Errorf("fetch %s: payload longer than its header says, or %v", ref, err)
	}
	return nil
}
