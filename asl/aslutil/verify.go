// Package aslutil holds store-generic utilities built on the asl store
// interfaces; they work with every backend (SPECS.md §6).
//
// Verify re-hashes stored artifacts, all of them or a deterministic sample,
// independently of the store's own read-time checks (SPECS.md §6.2), and
// reports each artifact that fails, telling integrity failures (damaged or
// missing data) apart from operational ones (I/O, unsupported hash).
package aslutil

import (
	"bytes"
	"container/heap"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/amduat/amduat/asl"
)

// VerifyStore is what Verify needs from a store.
type VerifyStore interface {
	asl.Fetcher
	asl.Enumerator
}

// Sample selects a deterministic subset of a store's artifacts. Each
// artifact gets a sample key, SampleKey(Seed, ref); selection depends only
// on the keys, never on time, randomness or the order of the store, so the
// same store and Sample always select the same artifacts, and a new Seed
// selects a different, independent subset.
type Sample struct {
	// Count, when > 0, selects the Count artifacts with the smallest keys
	// (all of them when the store holds fewer).
	Count int
	// Percent, when Count is 0, selects each artifact whose key lies in the
	// lowest Percent of the 64-bit key space: in expectation Percent% of
	// the artifacts. It must lie in (0, 100].
	Percent float64
	// Seed varies the selection.
	Seed string
}

// ParseSample parses the command-line form: "N" (a count, N >= 1) or "P%"
// (a percentage in (0, 100]).
func ParseSample(s string) (Sample, error) {
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || !(f > 0 && f <= 100) || strings.ContainsAny(p, "xXpPeEiInN_+") {
			return Sample{}, fmt.Errorf("sample %q: want a percentage in (0, 100], like 10%%", s)
		}
		return Sample{Percent: f}, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || strings.HasPrefix(s, "+") {
		return Sample{}, fmt.Errorf("sample %q: want a count >= 1 or a percentage like 10%%", s)
	}
	return Sample{Count: n}, nil
}

// String renders s in the form ParseSample reads.
func (s Sample) String() string {
	if s.Count > 0 {
		return strconv.Itoa(s.Count)
	}
	return strconv.FormatFloat(s.Percent, 'f', -1, 64) + "%"
}

// SampleKey is the first 8 bytes, big-endian, of
// SHA-256(u32 len(seed) || seed || ReferenceBytes(ref)).
func SampleKey(seed string, ref asl.Reference) uint64 {
	h := sha256.New()
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(seed)))
	h.Write(n[:])
	io.WriteString(h, seed)
	h.Write(ref.Bytes())
	var sum [sha256.Size]byte
	return binary.BigEndian.Uint64(h.Sum(sum[:0]))
}

// threshold returns the exclusive key bound of a percentage sample, and
// whether every key is selected.
func (s Sample) threshold() (uint64, bool) {
	if s.Percent >= 100 {
		return 0, true
	}
	return uint64(s.Percent / 100 * (1 << 64)), false
}

// VerifyOptions configures Verify. The zero value verifies everything with
// one worker per CPU.
type VerifyOptions struct {
	// Sample, when non-nil, verifies only the selected artifacts.
	Sample *Sample
	// Workers is the number of artifacts verified concurrently; <= 0 means
	// runtime.GOMAXPROCS(0).
	Workers int
}

// Progress is passed to the progress callback after every artifact.
// Totals are those of the selection; they are exact unless artifacts are
// added to the store while Verify runs.
type Progress struct {
	Checked, TotalArtifacts int64
	Bytes, TotalBytes       int64
	Failures                int
}

// Failure is one artifact that did not verify.
type Failure struct {
	Ref asl.Reference
	Err error
	// Integrity is true when the artifact's data is damaged or missing
	// (the error wraps asl.ErrIntegrity or asl.ErrNotFound), false for
	// operational failures such as I/O errors or an unsupported hash.
	Integrity bool
}

// Report summarizes a verification.
type Report struct {
	Stored   int64     // artifacts the store enumerated
	Selected int64     // artifacts chosen for verification
	Checked  int64     // artifacts verified, failed ones included
	Bytes    int64     // payload bytes read
	Failures []Failure // in ascending ReferenceBytes order
	// Damage is what the store could not enumerate: its enumeration went
	// on past it and reported it at the end as an error wrapping
	// asl.ErrIntegrity (an unreadable index record, a damaged table's key
	// range: SPECS.md §6.4, "Damage"), one entry per joined error.
	Damage []error
}

// IntegrityFailures counts failures with Integrity set.
func (r Report) IntegrityFailures() int {
	n := 0
	for _, f := range r.Failures {
		if f.Integrity {
			n++
		}
	}
	return n
}

// Verify reads every selected artifact through s, re-hashes its bytes with
// its reference's hash and compares the result and the fetched header with
// the reference and the enumerated header. Per-artifact failures go into the
// Report, and so does damage the enumeration reported (Report.Damage): a
// damaged store is verified to the end. The error is non-nil only when the
// walk itself fails otherwise (I/O error, ctx cancelled), in which case the
// Report holds what was done.
// progress, if non-nil, is called from the calling goroutine only.
func Verify(ctx context.Context, s VerifyStore, opts VerifyOptions, progress func(Progress)) (Report, error) {
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var (
		rep  Report
		prog Progress
	)
	selected := func(asl.Info) bool { return true }
	var chosen []asl.Info // Count sampling: the selection, in ReferenceBytes order
	switch {
	case opts.Sample != nil && opts.Sample.Count > 0:
		var err error
		chosen, rep.Stored, err = smallestKeys(ctx, s, *opts.Sample)
		if rep.Damage = damageOf(err); rep.Damage != nil {
			err = nil
		}
		if err != nil {
			return rep, err
		}
		for _, in := range chosen {
			prog.TotalArtifacts++
			prog.TotalBytes += int64(in.Size)
		}
	case opts.Sample != nil:
		if !(opts.Sample.Percent > 0 && opts.Sample.Percent <= 100) {
			return rep, fmt.Errorf("sample percentage %v outside (0, 100]", opts.Sample.Percent)
		}
		limit, all := opts.Sample.threshold()
		seed := opts.Sample.Seed
		selected = func(in asl.Info) bool { return all || SampleKey(seed, in.Ref) < limit }
	}
	if chosen == nil && progress != nil {
		// A first pass over the index gives the progress totals.
		err := s.Enumerate(ctx, asl.Reference{}, func(in asl.Info) error {
			if selected(in) {
				prog.TotalArtifacts++
				prog.TotalBytes += int64(in.Size)
			}
			return nil
		})
		if err != nil && damageOf(err) == nil {
			// Damage is reported by the second walk.
			return rep, fmt.Errorf("enumerate: %w", err)
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan asl.Info, workers)
	type result struct {
		info asl.Info
		n    int64
		err  error
	}
	results := make(chan result, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for in := range jobs {
				n, err := verifyOne(ctx, s, in)
				results <- result{in, n, err}
			}
		}()
	}
	var walkErr error
	stored := int64(0)
	go func() {
		defer close(jobs)
		send := func(in asl.Info) error {
			select {
			case jobs <- in:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if chosen != nil {
			for _, in := range chosen {
				if err := send(in); err != nil {
					walkErr = err
					return
				}
			}
			return
		}
		// A percentage that selects nothing from a non-empty store checks
		// the artifact with the smallest sample key instead: a sample
		// always checks at least one.
		sent := 0
		var fallback asl.Info
		var fallbackKey uint64
		err := s.Enumerate(ctx, asl.Reference{}, func(in asl.Info) error {
			stored++
			if !selected(in) {
				if k := SampleKey(opts.Sample.Seed, in.Ref); stored == 1 || k < fallbackKey {
					fallback, fallbackKey = in, k
				}
				return nil
			}
			sent++
			return send(in)
		})
		if err == nil && sent == 0 && stored > 0 {
			err = send(fallback)
		}
		if rep.Damage = damageOf(err); rep.Damage == nil && err != nil {
			walkErr = fmt.Errorf("enumerate: %w", err)
		}
	}()
	go func() {
		wg.Wait()
		close(results)
	}()

	var ctxErr error
	for r := range results {
		if r.err != nil && ctx.Err() != nil && errors.Is(r.err, ctx.Err()) {
			ctxErr = ctx.Err()
			continue
		}
		rep.Checked++
		rep.Bytes += r.n
		if r.err != nil {
			rep.Failures = append(rep.Failures, Failure{
				Ref:       r.info.Ref,
				Err:       r.err,
				Integrity: errors.Is(r.err, asl.ErrIntegrity) || errors.Is(r.err, asl.ErrNotFound),
			})
		}
		prog.Checked, prog.Bytes, prog.Failures = rep.Checked, rep.Bytes, len(rep.Failures)
		prog.TotalArtifacts = max(prog.TotalArtifacts, prog.Checked)
		prog.TotalBytes = max(prog.TotalBytes, prog.Bytes)
		if progress != nil {
			progress(prog)
		}
	}
	// results is closed only after the walker has returned (it closes
	// jobs, the workers drain it), so walkErr and stored are settled.
	if chosen == nil {
		rep.Stored = stored
	}
	rep.Selected = rep.Checked
	sort.Slice(rep.Failures, func(i, j int) bool {
		return bytes.Compare(rep.Failures[i].Ref.Bytes(), rep.Failures[j].Ref.Bytes()) < 0
	})
	if walkErr != nil {
		return rep, walkErr
	}
	if ctxErr != nil {
		return rep, ctxErr
	}
	return rep, ctx.Err()
}

// damageOf splits an enumeration error that reports damage the walk went
// past (it wraps asl.ErrIntegrity, and no cancellation) into its joined
// errors; it returns nil for any other error.
func damageOf(err error) []error {
	if err == nil || !errors.Is(err, asl.ErrIntegrity) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	for {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			return j.Unwrap()
		}
		next := errors.Unwrap(err)
		if next == nil {
			return []error{err}
		}
		if !errors.Is(next, asl.ErrIntegrity) {
			return []error{err}
		}
		err = next
	}
}

// verifyOne fetches one artifact and re-hashes it. It returns the number of
// payload bytes read.
func verifyOne(ctx context.Context, f asl.Fetcher, in asl.Info) (int64, error) {
	rc, hdr, err := f.Fetch(ctx, in.Ref)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	if hdr != in.Header {
		return 0, fmt.Errorf("%s: fetched header (size %d, tag %s) differs from the enumerated one (size %d, tag %s): %w",
			in.Ref, hdr.Size, hdr.TagString(), in.Size, in.TagString(), asl.ErrIntegrity)
	}
	h, err := asl.NewHasher(in.Ref.HashID(), hdr)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", in.Ref, err)
	}
	n, err := io.Copy(h, ctxReader{ctx, io.LimitReader(rc, int64(min(hdr.Size, math.MaxInt64-1))+1)})
	if err != nil {
		return n, err
	}
	if uint64(n) != hdr.Size {
		return n, fmt.Errorf("%s: read %d payload bytes, header says %d: %w", in.Ref, n, hdr.Size, asl.ErrIntegrity)
	}
	got, err := h.Sum()
	if err != nil {
		return n, fmt.Errorf("%s: %v: %w", in.Ref, err, asl.ErrIntegrity)
	}
	if got != in.Ref {
		return n, fmt.Errorf("%s: stored bytes hash to %s: %w", in.Ref, got, asl.ErrIntegrity)
	}
	return n, nil
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// smallestKeys walks the store once and returns the sample.Count artifacts
// with the smallest sample keys, in ReferenceBytes order, and the number of
// artifacts stored.
func smallestKeys(ctx context.Context, s asl.Enumerator, sample Sample) ([]asl.Info, int64, error) {
	var hp keyHeap
	stored := int64(0)
	err := s.Enumerate(ctx, asl.Reference{}, func(in asl.Info) error {
		stored++
		k := SampleKey(sample.Seed, in.Ref)
		switch {
		case hp.Len() < sample.Count:
			heap.Push(&hp, keyed{k, in})
		case keyLess(keyed{k, in}, hp[0]):
			hp[0] = keyed{k, in}
			heap.Fix(&hp, 0)
		}
		return nil
	})
	if err != nil {
		return nil, stored, fmt.Errorf("enumerate: %w", err)
	}
	out := make([]asl.Info, len(hp))
	for i, e := range hp {
		out[i] = e.info
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].Ref.Bytes(), out[j].Ref.Bytes()) < 0 })
	return out, stored, nil
}

type keyed struct {
	key  uint64
	info asl.Info
}

// keyLess orders by sample key, then by ReferenceBytes, so that even equal
// keys select deterministically.
func keyLess(a, b keyed) bool {
	if a.key != b.key {
		return a.key < b.key
	}
	return bytes.Compare(a.info.Ref.Bytes(), b.info.Ref.Bytes()) < 0
}

// keyHeap is a max-heap on key, so the root is the largest key kept.
type keyHeap []keyed

func (h keyHeap) Len() int           { return len(h) }
func (h keyHeap) Less(i, j int) bool { return keyLess(h[j], h[i]) }
func (h keyHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *keyHeap) Push(x any)        { *h = append(*h, x.(keyed)) }
func (h *keyHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
