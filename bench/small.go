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

func runSmall(ctx context.Context, e *Env) ([]Row, error) {
	n, size, batch := e.Sizes.SmallCount, e.Sizes.SmallSize, e.Sizes.SmallBatch
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

	// Put: batch by batch, the hash limit of the same batch measured just
	// before its PutBatch.
	e.logf("small: PutBatch %s in batches of %d", label, batch)
	buf := make([]byte, batch*size)
	arts := make([]asl.Artifact, batch)
	rh := newRefHasher()
	refs := make([]asl.Reference, 0, n)
	// The durability floor: each batch's payload appended to a plain file
	// and fdatasynced, right after its PutBatch.
	plain, err := os.Create(filepath.Join(dir, "plain"))
	if err != nil {
		return nil, err
	}
	defer plain.Close()
	var dPut, dHashPut, dPlain time.Duration
	io0 := ReadIO()
	w := StartWindow()
	for first := 0; first < n; first += batch {
		k := min(batch, n-first)
		smallBatch(buf, arts[:k], size, first)
		dHashPut += rh.hashBatch(arts[:k])
		var rs []asl.Reference
		t := time.Now()
		phase(ctx, "put", func(ctx context.Context) { rs, err = s.PutBatch(ctx, asl.HashSHA256, arts[:k]) })
		dPut += time.Since(t)
		if err != nil {
			return nil, fmt.Errorf("PutBatch of artifacts %d..%d: %w", first, first+k-1, err)
		}
		t = time.Now()
		if _, err := plain.Write(buf[:k*size]); err != nil {
			return nil, err
		}
		if err := plain.Sync(); err != nil {
			return nil, err
		}
		dPlain += time.Since(t)
		for i, ref := range rs {
			if string(ref.Digest()) != string(rh.digest(arts[i])) {
				return nil, fmt.Errorf("PutBatch returned %s for artifact %d, which hashes differently", ref, first+i)
			}
		}
		refs = append(refs, rs...)
	}
	rssPut, _ := w.Stop()
	ioPut := ReadIO().Sub(io0)
	ioPut.WChar -= int64(n * size) // the plain file's share
	ioPut.WriteBytes -= int64(n * size)

	// Get: every artifact once, in a deterministic shuffled order.
	e.logf("small: random Fetch of %s", label)
	order := rand.New(rand.NewPCG(smallSeed, 0)).Perm(n)
	got := make([]byte, size)
	w = StartWindow()
	io0 = ReadIO()
	start := time.Now()
	phase(ctx, "get", func(ctx context.Context) {
		for _, i := range order {
			if err = fetchAll(ctx, s, refs[i], got); err != nil {
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
	for first := 0; first < n; first += batch {
		k := min(batch, n-first)
		smallBatch(buf, arts[:k], size, first)
		dHashGet += rh.hashBatch(arts[:k])
	}

	return []Row{
		{
			Name:     "small/put-batch",
			Figure:   Quantity{perSec(n, dPut), "artifacts/s"},
			Baseline: &Baseline{perSec(n, dHashPut), "artifacts/s", "SHA-256 of same ArtifactBytes"},
			Target:   &Target{">= 250,000/s", OnFigure, AtLeast, 250_000},
			PeakRSS:  rssPut,
			Note: fmt.Sprintf("%s random (incompressible) artifacts, PutBatch of %d each (one synced commit per batch, %d commits), fresh store; %s in PutBatch; %s",
				label, batch, (n+batch-1)/batch, dPut.Round(time.Millisecond), ioText(ioPut, int64(n*size), "written")),
		},
		{
			Name:     "small/put-vs-fsync",
			Figure:   Quantity{perSec(n, dPut), "artifacts/s"},
			Baseline: &Baseline{perSec(n, dPlain), "artifacts/s", "plain file append+fdatasync per batch"},
			PeakRSS:  rssPut,
			Note:     fmt.Sprintf("the same PutBatch calls against appending each batch's payload bytes (%d x %d B) to a plain file and fdatasyncing it, interleaved (%s)", batch, size, dPlain.Round(time.Millisecond)),
		},
		{
			Name:     "small/get-random",
			Figure:   Quantity{perSec(n, dGet), "artifacts/s"},
			Baseline: &Baseline{perSec(n, dHashGet), "artifacts/s", "SHA-256 of same ArtifactBytes"},
			Target:   &Target{">= 150,000/s", OnFigure, AtLeast, 150_000},
			PeakRSS:  rssGet,
			Note: fmt.Sprintf("Fetch + read to EOF of all %d in a shuffled order, one goroutine, each verified against its digest, right after the puts (no manual compaction); %s; %s, %d read syscalls",
				n, dGet.Round(time.Millisecond), ioText(ioGet, int64(n*size), "read"), ioGet.SyscR),
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
