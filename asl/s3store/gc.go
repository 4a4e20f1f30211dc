package s3store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/amduat/amduat/asl"
)

// Garbage collection on a bucket that other servers keep writing to
// (SPECS.md §6.7, "Garbage collection"). In short:
//
//   - One collection at a time: it begins by writing the state object
//     PREFIX gc/state (generation N+1, running) conditionally on what it
//     read; the state's modification time T0 (the object store's clock) is
//     the mark's start, and a collection removes only unmarked artifact
//     objects last written before T0 - grace.
//   - Mark: the pins (and the caller's extra roots) are read after T0 and
//     their closure followed (Children).
//   - Sweep, shard by shard (DD, the digest's first byte; Parallel shards
//     at a time): the collection
//     first creates PREFIX gc/claims/N/DD holding "sweep" (If-None-Match:
//     *), then removes the shard's candidates, then writes "swept".
//   - A collection whose grace is shorter than DefaultGrace writes its
//     sweep claims as deletion records: the references it is about to
//     remove from the shard, kept DefaultGrace.
//   - A re-put of an existing artifact reads the state before and after
//     rewriting it; when a collection ran meanwhile it creates the claim
//     of the object's shard holding "keep" (the collection then skips the
//     shard), or, finding "sweep", waits for "swept"; then it writes the
//     object again if it is gone.
//   - A pin, after writing its pin object, walks the closure of what it
//     pins whenever a short-grace collection runs (state before or after)
//     or left deletion records: it keeps the closure's shards from a
//     running one as a re-put does, then checks every member present; a
//     missing member that a deletion record names fails the pin with
//     asl.ErrNotFound (put again, pin again), one no record names was
//     never stored.
//
// Claims are created with If-None-Match: *, so exactly one of a writer's
// "keep" and the collection's "sweep" wins each shard: no object is removed
// after a writer found it present and relied on it; and a removal is
// recorded before it is made, so a pin that finds a member missing can
// tell a removed one from one never stored.

// GC defaults.
const (
	// DefaultGrace is how long an artifact no pin reaches is kept after
	// its last write (SPECS.md §6.7).
	DefaultGrace = 24 * time.Hour
	// DefaultTouchAge: a put of an artifact already stored rewrites it
	// when its object is older than this, so that its grace starts again.
	DefaultTouchAge = time.Hour
	// DefaultLease: a running collection rewrites its state object at
	// least every Lease/4; one not rewritten for Lease is taken as dead.
	DefaultLease = 2 * time.Minute
)

// ErrGCRunning: another collection holds the bucket.
var ErrGCRunning = errors.New("a collection is running on this bucket")

// gcState is the body of PREFIX gc/state.
type gcState struct {
	Gen     uint64 `json:"gen"`
	Running bool   `json:"running"`
	ID      string `json:"id"`
	GraceNS int64  `json:"grace_ns"`

	mod  time.Time // the object's modification time
	etag string
	seen bool // the object exists
}

func (s *Store) gcStateKey() string { return s.prefix + "gc/state" }

func (s *Store) claimKey(gen uint64, dd string) string {
	return s.prefix + "gc/claims/" + strconv.FormatUint(gen, 10) + "/" + dd
}

// readGCState reads the state object (the zero state when absent).
func (s *Store) readGCState(ctx context.Context) (gcState, error) {
	key := s.gcStateKey()
	body, info, _, err := s.core.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		if code(err) == "NoSuchKey" {
			return gcState{}, nil
		}
		return gcState{}, s.errorf("read gc state", key, asl.Reference{}, err)
	}
	defer body.Close()
	var st gcState
	d := json.NewDecoder(body)
	d.DisallowUnknownFields()
	if err := d.Decode(&st); err != nil || !atEOF(d) {
		return gcState{}, fmt.Errorf("s3store: s3://%s/%s is no gc state object: %w", s.bucket, key, asl.ErrIntegrity)
	}
	st.mod, st.etag, st.seen = info.LastModified, info.ETag, true
	return st, nil
}

func (s *Store) lease() time.Duration {
	if s.opts.Lease > 0 {
		return s.opts.Lease
	}
	return DefaultLease
}

func (s *Store) touchAge() time.Duration { return durationOption(s.opts.TouchAge, DefaultTouchAge) }

// live says whether st is a running collection that has not missed its
// lease.
func (s *Store) live(st gcState) bool {
	return st.Running && time.Since(st.mod) < s.lease()
}

// overlapped says whether a collection may have run between the reads a
// and b.
func overlapped(a, b gcState) bool { return a.Running || b.Running || a.Gen != b.Gen }

// shard is the claim shard of an artifact: its digest's first byte.
func shard(ref asl.Reference) string {
	h := ref.String()
	if len(h) < 6 {
		return "00"
	}
	return h[4:6]
}

// keepShards makes sure the collection st (running) removes nothing more
// in the shards of refs: it creates each shard's claim holding "keep", or
// waits until a claim holding "sweep" holds "swept" (or the collection
// ended or died).
func (s *Store) keepShards(ctx context.Context, st gcState, refs []asl.Reference) error {
	if !st.Running {
		return nil
	}
	shards := map[string]bool{}
	for _, r := range refs {
		shards[shard(r)] = true
	}
	var list []string
	for dd := range shards {
		list = append(list, dd)
	}
	sort.Strings(list)
	errs := make([]error, len(list))
	s.parallel(len(list), func(i int) {
		errs[i] = s.keepShard(ctx, st, list[i])
	})
	return errors.Join(errs...)
}

func (s *Store) keepShard(ctx context.Context, st gcState, dd string) error {
	key := s.claimKey(st.Gen, dd)
	err := s.putSmall(ctx, key, []byte(claimKeep), "", true)
	if !errors.Is(err, errPrecondition) {
		return err
	}
	for attempt := 0; ; attempt++ {
		state, found, err := s.readClaimState(ctx, key)
		if err != nil {
			return err
		}
		if !found || state != claimSweep { // keep (another writer's) or swept
			return nil
		}
		cur, err := s.readGCState(ctx)
		if err != nil {
			return err
		}
		if cur.Gen != st.Gen || !s.live(cur) {
			return nil
		}
		if err := sleepCtx(ctx, min(attempt, 6)); err != nil {
			return err
		}
	}
}

// refresh is called by a put that found its artifact already stored at
// key (b: the bytes the put would have written), replace when the stored
// object is not b (damaged, or of an older form) and must be overwritten.
// An object older than the touch age (or to replace) is written again, so that its grace starts again; if a
// collection ran meanwhile the object's shard is kept from it and the
// object checked, and written again if it was removed (SPECS.md §6.7,
// "What a writer does").
func (s *Store) refresh(ctx context.Context, ref asl.Reference, key string, b []byte, sha string, replace bool) error {
	if !replace {
		info, err := s.core.Client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
		if err == nil && time.Since(info.LastModified) < s.touchAge() {
			return nil
		}
	}
	g1, err := s.readGCState(ctx)
	if err != nil {
		return err
	}
	write := func() error {
		po := minio.PutObjectOptions{ContentType: "application/octet-stream", DisableContentSha256: sha != "", DisableMultipart: true}
		withChecksum(&po, b, sha)
		if _, err := s.core.PutObject(ctx, s.bucket, key, bytes.NewReader(b), int64(len(b)), "", sha, po); err != nil {
			return s.errorf("put (refresh)", key, ref, err)
		}
		return nil
	}
	if err := write(); err != nil {
		return err
	}
	g2, err := s.readGCState(ctx)
	if err != nil || !overlapped(g1, g2) {
		return err
	}
	if err := s.keepShards(ctx, g2, []asl.Reference{ref}); err != nil {
		return err
	}
	if _, err := s.core.Client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{}); err != nil {
		if code(err) != "NoSuchKey" {
			return s.errorf("put (check)", key, ref, err)
		}
		return write()
	}
	return nil
}

// guardPin is called by Pin after its pin object is written, with the
// state read before (SPECS.md §6.7, "What a writer does"). A collection
// with a short grace (below DefaultGrace) may have removed part of ref's
// closure before its mark could see the pin: while it ran (g1 or g2 names
// it) or before the pin began (then its deletion records are in the
// claims). In either case the whole closure is walked; its shards are kept
// from a short collection still running (keep claims, or waiting out a
// sweep); and every member found missing is looked up in the deletion
// records: one a collection removed fails the pin with asl.ErrNotFound
// (put it again and pin again); one no collection removed was never stored
// and contributes nothing (SPECS.md §19.6), as in the embedded store.
func (s *Store) guardPin(ctx context.Context, g1 gcState, ref asl.Reference) error {
	g2, err := s.readGCState(ctx)
	if err != nil {
		return err
	}
	records, err := s.deletionRecords(ctx)
	if err != nil {
		return err
	}
	if !shortRunning(g1) && !shortRunning(g2) && len(records) == 0 {
		// No collection that could remove what was put within the
		// grace ran or runs: nothing to check.
		return nil
	}
	var missing []asl.Reference
	refs, err := s.reach(ctx, []asl.Reference{ref}, s.children, nil, &missing)
	if err != nil {
		return err
	}
	if !shortRunning(g2) {
		// Every collection that missed the pin ended before S2: what
		// the walk (after S2) found stored stays.
		return s.checkRemoved(ctx, ref, missing)
	}
	if err := s.keepShards(ctx, g2, append(append([]asl.Reference(nil), refs...), missing...)); err != nil {
		return err
	}
	// What the walk found may have been removed since, until the keep
	// claims above.
	gone := make([]bool, len(refs))
	errs := make([]error, len(refs))
	s.parallel(len(refs), func(i int) {
		_, err := s.Stat(ctx, refs[i])
		switch {
		case err == nil, errors.Is(err, asl.ErrIntegrity):
			// Stored (damage is not removal).
		case errors.Is(err, asl.ErrNotFound):
			gone[i] = true
		default:
			errs[i] = fmt.Errorf("s3store: pin (check): %w", err)
		}
	})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for i, g := range gone {
		if g {
			missing = append(missing, refs[i])
		}
	}
	return s.checkRemoved(ctx, ref, missing)
}

// checkRemoved fails the pin of ref when a deletion record names one of
// the members of its closure found missing.
func (s *Store) checkRemoved(ctx context.Context, ref asl.Reference, missing []asl.Reference) error {
	if len(missing) == 0 {
		return nil
	}
	// Deletion records are written before the deletes they name, so
	// one read after a member was found missing names it if a
	// collection removed it.
	removed, err := s.removedByCollection(ctx, missing)
	if err != nil {
		return err
	}
	for _, m := range missing {
		if removed[m] {
			return fmt.Errorf("s3store: %s (reached from %s) was removed by a collection before the pin: put it again: %w", m, ref, asl.ErrNotFound)
		}
	}
	return nil
}

// shortRunning says whether st is a running collection whose grace is
// below DefaultGrace: one that may remove an artifact put less than the
// default grace ago.
func shortRunning(st gcState) bool {
	return st.Running && time.Duration(st.GraceNS) < DefaultGrace
}

// Claim states: the first line of a claim object. A collection with a
// short grace writes its sweep and swept claims as deletion records: the
// state, then the text form of every reference it removes from the shard,
// each on a line of its own (SPECS.md §6.7). Any claim longer than
// len(claimSweep) is therefore a deletion record.
const (
	claimKeep  = "keep"
	claimSweep = "sweep"
	claimSwept = "swept"
)

// maxClaim bounds a deletion record read: 2^20 references of 68 hex
// digits and a newline, and the state.
const maxClaim = 70 << 20

// claimBody is a claim's bytes: the state alone, or with the deletion
// record of objs when record is set.
func claimBody(state string, objs []minio.ObjectInfo, record bool) []byte {
	b := []byte(state)
	if !record {
		return b
	}
	b = append(b, '\n')
	for _, o := range objs {
		b = append(b, path.Base(o.Key)...)
		b = append(b, '\n')
	}
	return b
}

// readClaimState reads the state of the claim at key: its first five
// bytes (one ranged GET: a deletion record is not read whole).
func (s *Store) readClaimState(ctx context.Context, key string) (string, bool, error) {
	o := minio.GetObjectOptions{}
	o.SetRange(0, int64(len(claimSweep))-1)
	body, _, _, err := s.core.GetObject(ctx, s.bucket, key, o)
	if err != nil {
		if code(err) == "NoSuchKey" {
			return "", false, nil
		}
		return "", false, s.errorf("read claim", key, asl.Reference{}, err)
	}
	defer body.Close()
	b, err := io.ReadAll(body)
	if err != nil {
		return "", false, s.errorf("read claim", key, asl.Reference{}, err)
	}
	return strings.TrimSuffix(string(b), "\n"), true, nil
}

// deletionRecords lists the claims that are deletion records (longer than
// a bare state), of every generation kept (SPECS.md §6.7).
func (s *Store) deletionRecords(ctx context.Context) ([]minio.ObjectInfo, error) {
	prefix := s.prefix + "gc/claims/"
	var out []minio.ObjectInfo
	for obj := range s.core.Client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			return nil, s.errorf("list gc claims", prefix, asl.Reference{}, obj.Err)
		}
		if obj.Size > int64(len(claimSweep)) {
			out = append(out, obj)
		}
	}
	return out, nil
}

// removedByCollection says which of refs a deletion record names: read
// after each was found missing, so that a collection's removal of it
// (recorded before the removal) is seen.
func (s *Store) removedByCollection(ctx context.Context, refs []asl.Reference) (map[asl.Reference]bool, error) {
	recs, err := s.deletionRecords(ctx)
	if err != nil {
		return nil, err
	}
	want := map[string]asl.Reference{}
	shards := map[string]bool{}
	for _, r := range refs {
		want[r.String()] = r
		shards[shard(r)] = true
	}
	var read []minio.ObjectInfo
	for _, o := range recs {
		if shards[path.Base(o.Key)] {
			read = append(read, o)
		}
	}
	found := make([][]asl.Reference, len(read))
	errs := make([]error, len(read))
	s.parallel(len(read), func(i int) {
		b, _, ok, err := s.readSmall(ctx, read[i].Key, maxClaim)
		if err != nil || !ok {
			errs[i] = err
			return
		}
		for _, line := range strings.Split(string(b), "\n") {
			if r, ok := want[line]; ok {
				found[i] = append(found[i], r)
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	out := map[asl.Reference]bool{}
	for _, f := range found {
		for _, r := range f {
			out[r] = true
		}
	}
	return out, nil
}

// SetChildren sets the references an artifact contributes (SPECS.md
// §19.6; closure.Reach gives the project's rules): Pin keeps the whole
// closure of what it pins from a concurrent collection, GC marks through
// it. Unset, artifacts contribute nothing. Call it before using the store.
func (s *Store) SetChildren(f ChildrenFunc) { s.children = f }

// ChildrenFunc returns the references an artifact contributes (SPECS.md
// §19.6; closure.Children with the project's rules).
type ChildrenFunc func(ctx context.Context, in asl.Info) ([]asl.Reference, error)

// reach returns every stored artifact roots reach through children
// (breadth first, each level Parallel at a time), roots included; a
// reference that is not stored contributes nothing, and is appended to
// missing when set. marked, when set, is filled as it goes.
func (s *Store) reach(ctx context.Context, roots []asl.Reference, children ChildrenFunc, marked map[asl.Reference]bool, missing *[]asl.Reference) ([]asl.Reference, error) {
	if marked == nil {
		marked = map[asl.Reference]bool{}
	}
	var out []asl.Reference
	var level []asl.Reference
	for _, r := range roots {
		if !r.IsZero() && !marked[r] {
			marked[r] = true
			level = append(level, r)
		}
	}
	for len(level) > 0 {
		kids := make([][]asl.Reference, len(level))
		present := make([]bool, len(level))
		errs := make([]error, len(level))
		s.parallel(len(level), func(i int) {
			in, err := s.Stat(ctx, level[i])
			switch {
			case err == nil:
			case errors.Is(err, asl.ErrNotFound) && !errors.Is(err, asl.ErrIntegrity), errors.Is(err, asl.ErrUnsupported):
				return
			default:
				errs[i] = err
				return
			}
			present[i] = true
			if children != nil {
				in.Ref = level[i]
				kids[i], errs[i] = children(ctx, in)
			}
		})
		if err := errors.Join(errs...); err != nil {
			return nil, fmt.Errorf("s3store: mark: %w", err)
		}
		var next []asl.Reference
		for i, r := range level {
			if present[i] {
				out = append(out, r)
			} else if missing != nil {
				*missing = append(*missing, r)
			}
			for _, k := range kids[i] {
				if !k.IsZero() && !marked[k] {
					marked[k] = true
					next = append(next, k)
				}
			}
		}
		level = next
	}
	return out, nil
}

// GCOptions configure GC.
type GCOptions struct {
	// Grace keeps every artifact object written within Grace before the
	// mark's start (zero: DefaultGrace; negative: none). It must be at least the touch
	// age of the writers (Options.TouchAge): GC refuses a shorter one.
	Grace time.Duration
	// Roots, when set, returns roots besides the pins (the runs the run
	// log keeps, SPECS.md §19.7); called after the mark began.
	Roots func(ctx context.Context) ([]asl.Reference, error)
	// Children gives the references an artifact contributes (default: the
	// store's, SetChildren; nil: none).
	Children ChildrenFunc
	// DryRun removes nothing and writes no state.
	DryRun bool
	// PartAge is the age of the leftover parts swept afterwards
	// (Sweep; zero: DefaultSweepAge; negative: none).
	PartAge time.Duration
	// PackLoose moves what layout version 3 and before wrote into packs
	// (SPECS.md §6.7, "Versions"): the marked loose artifact objects older
	// than the grace, and every loose index entry.
	PackLoose bool
	// Started, when set, is called once the mark began (tests).
	Started func()
	// BeforeSweep, when set, is called between the mark and the sweep
	// (tests).
	BeforeSweep func()
}

// GCReport says what GC found and removed; it holds no times.
type GCReport struct {
	Gen          uint64 `json:"gen"`
	Pins         int    `json:"pins"`
	Roots        int    `json:"roots"`
	Reachable    int    `json:"reachable"`     // stored artifacts the roots reach
	Listed       int    `json:"listed"`        // artifact objects listed
	Young        int    `json:"young"`         // unreachable, written within the grace
	Candidates   int    `json:"candidates"`    // unreachable and older
	Deleted      int    `json:"deleted"`       // removed (dry run: would be)
	DeletedBytes int64  `json:"deleted_bytes"` // their object bytes
	KeptShards   int    `json:"kept_shards"`   // shards a writer kept from the sweep
	Kept         int    `json:"kept"`          // candidates in those shards, kept
	// Packs (SPECS.md §6.7, "Packs"): those to repack or remove, those
	// left because a writer kept a shard they remove from, those removed
	// (their bytes are in DeletedBytes) and the record bytes carried into
	// new packs.
	Packs            int   `json:"packs"`
	KeptPacks        int   `json:"kept_packs"`
	PacksRemoved     int   `json:"packs_removed"`
	PackBytesCarried int64 `json:"pack_bytes_carried"`
	// With PackLoose: loose artifact objects written into packs (and
	// then removed with the candidates of their shards), and loose index
	// entries written into index objects and removed.
	LooseMoved   int         `json:"loose_moved"`
	EntriesMoved int         `json:"entries_moved"`
	DryRun       bool        `json:"dry_run"`
	Sweep        SweepReport `json:"sweep"`
}

// GC collects the artifacts no pin (nor opts.Roots) reaches and no writer
// wrote within the grace period, while other processes keep reading and
// writing the bucket (SPECS.md §6.7, "Garbage collection"), then sweeps
// the leftover parts (Sweep). A second collection on the bucket at once
// fails with ErrGCRunning.
func (s *Store) GC(ctx context.Context, opts GCOptions) (GCReport, error) {
	rep := GCReport{DryRun: opts.DryRun}
	if err := s.check(); err != nil {
		return rep, err
	}
	grace := durationOption(opts.Grace, DefaultGrace)
	if grace < s.touchAge() {
		return rep, fmt.Errorf("s3store: gc: grace %v is shorter than the touch age %v of the writers (SPECS.md §6.7)", grace, s.touchAge())
	}
	children := opts.Children
	if children == nil {
		children = s.children
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	st, t0, lease, err := s.beginGC(ctx, cancel, grace, opts.DryRun)
	if err != nil {
		return rep, err
	}
	ended := opts.DryRun
	defer func() {
		if !ended {
			// Failed part-way: give the bucket back now rather than
			// when the lease runs out.
			_ = s.endGC(context.WithoutCancel(ctx), st, lease)
		}
	}()
	rep.Gen = st.Gen
	if opts.Started != nil {
		opts.Started()
	}
	// Mark.
	pins, err := s.Pins(ctx)
	if err != nil {
		return rep, err
	}
	rep.Pins = len(pins)
	var roots []asl.Reference
	for _, p := range pins {
		roots = append(roots, p.Ref)
	}
	if opts.Roots != nil {
		extra, err := opts.Roots(ctx)
		if err != nil {
			return rep, fmt.Errorf("s3store: gc roots: %w", err)
		}
		roots = append(roots, extra...)
	}
	rep.Roots = len(roots)
	marked := map[asl.Reference]bool{}
	live, err := s.reach(ctx, roots, children, marked, nil)
	if err != nil {
		return rep, err
	}
	rep.Reachable = len(live)
	// Candidates, by shard.
	cutoff := t0.Add(-grace)
	cands := map[string][]minio.ObjectInfo{}  // loose candidates
	packed := map[string][]minio.ObjectInfo{} // packed candidates (their artifact keys, for the records)
	lo := minio.ListObjectsOptions{Prefix: s.prefix + "a/", Recursive: true}
	for obj := range s.core.Client.ListObjects(ctx, s.bucket, lo) {
		if obj.Err != nil {
			return rep, s.errorf("gc (list artifacts)", lo.Prefix, asl.Reference{}, obj.Err)
		}
		rep.Listed++
		ref, err := asl.ParseReference(path.Base(obj.Key))
		if err != nil || s.ArtifactKey(ref) != obj.Key || marked[ref] {
			continue // not an artifact key (left alone), or reachable
		}
		if !obj.LastModified.Before(cutoff) {
			rep.Young++
			continue
		}
		rep.Candidates++
		cands[shard(ref)] = append(cands[shard(ref)], obj)
	}
	if opts.PackLoose {
		moved, err := s.packLoose(ctx, marked, cutoff, opts.DryRun)
		if err != nil {
			return rep, err
		}
		for _, o := range moved {
			ref, _ := asl.ParseReference(path.Base(o.Key))
			cands[shard(ref)] = append(cands[shard(ref)], o)
		}
		rep.LooseMoved = len(moved)
		if rep.EntriesMoved, err = s.packLooseEntries(ctx, opts.DryRun); err != nil {
			return rep, err
		}
	}
	// Packs: every index object is listed again (their modification
	// times are the object store's), then each old pack's fate decided.
	if err := s.listPacksFull(ctx); err != nil {
		return rep, err
	}
	plans := s.planPacks(marked, cutoff)
	packsOf := map[string][]*packPlan{} // shard -> plans that remove from it
	for _, pl := range plans {
		rep.Packs++
		rep.Candidates += len(pl.removed)
		seen := map[string]bool{}
		for _, r := range pl.removed {
			dd := shard(r)
			packed[dd] = append(packed[dd], minio.ObjectInfo{Key: s.ArtifactKey(r)})
			if !seen[dd] {
				seen[dd] = true
				packsOf[dd] = append(packsOf[dd], pl)
			}
		}
	}
	if opts.BeforeSweep != nil {
		opts.BeforeSweep()
	}
	if opts.DryRun {
		for _, objs := range cands {
			rep.Deleted += len(objs)
			for _, o := range objs {
				rep.DeletedBytes += o.Size
			}
		}
		for _, pl := range plans {
			rep.PacksRemoved++
			rep.DeletedBytes += pl.bytes
			for _, l := range pl.keep {
				rep.PackBytesCarried += int64(l.a.Stored)
			}
		}
		rep.Sweep, err = s.Sweep(ctx, partAge(opts.PartAge), true)
		return rep, err
	}
	// A short grace records what it removes (see guardPin).
	record := grace < DefaultGrace
	var shards []string
	for dd := range cands {
		shards = append(shards, dd)
	}
	for dd := range packed {
		if _, ok := cands[dd]; !ok {
			shards = append(shards, dd)
		}
	}
	sort.Strings(shards)
	// Claim every shard first (Parallel at a time; a writer's keep wins
	// a shard from the collection), then remove the loose candidates of
	// the shards won and carry or remove the packs none of whose removed
	// artifacts lies in a kept shard, then mark the shards swept.
	type shardRes struct {
		kept  bool
		n     int
		bytes int64
		err   error
	}
	res := make([]shardRes, len(shards))
	body := func(state string, dd string) []byte {
		return claimBody(state, append(append([]minio.ObjectInfo(nil), cands[dd]...), packed[dd]...), record)
	}
	s.parallel(len(shards), func(i int) {
		r := &res[i]
		if err := context.Cause(ctx); err != nil {
			r.err = err
			return
		}
		err := s.putSmall(ctx, s.claimKey(st.Gen, shards[i]), body(claimSweep, shards[i]), "", true)
		if errors.Is(err, errPrecondition) {
			r.kept = true
			return
		}
		r.err = err
	})
	keptPlan := map[*packPlan]bool{}
	for i, dd := range shards {
		if res[i].kept {
			for _, pl := range packsOf[dd] {
				keptPlan[pl] = true
			}
		}
	}
	s.parallel(len(shards), func(i int) {
		r := &res[i]
		if r.kept || r.err != nil {
			return
		}
		r.n, r.bytes, r.err = s.removeObjects(ctx, cands[shards[i]])
	})
	var carry []*packPlan
	for _, pl := range plans {
		if keptPlan[pl] {
			rep.KeptPacks++
		} else {
			carry = append(carry, pl)
		}
	}
	var errs []error
	claimErr := false
	for _, r := range res {
		claimErr = claimErr || r.err != nil
	}
	if !claimErr {
		n, b, carried, err := s.carryPacks(ctx, carry)
		rep.PacksRemoved += n
		rep.DeletedBytes += b
		rep.PackBytesCarried += carried
		if err != nil {
			errs = append(errs, err)
		}
	}
	s.parallel(len(shards), func(i int) {
		r := &res[i]
		if r.kept || r.err != nil {
			return
		}
		r.err = s.putSmall(ctx, s.claimKey(st.Gen, shards[i]), body(claimSwept, shards[i]), "", false)
	})
	for i, r := range res {
		if r.kept {
			rep.KeptShards++
			rep.Kept += len(cands[shards[i]])
		}
		rep.Deleted += r.n
		rep.DeletedBytes += r.bytes
		if r.err != nil {
			errs = append(errs, r.err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return rep, err
	}
	ended = true
	if err := s.endGC(ctx, st, lease); err != nil {
		return rep, err
	}
	rep.Sweep, err = s.Sweep(ctx, partAge(opts.PartAge), false)
	return rep, err
}

func partAge(d time.Duration) time.Duration { return durationOption(d, DefaultSweepAge) }

// removeObjects removes objs with multi-object DELETEs (up to 1000 keys a
// request).
func (s *Store) removeObjects(ctx context.Context, objs []minio.ObjectInfo) (int, int64, error) {
	ch := make(chan minio.ObjectInfo, len(objs))
	for _, o := range objs {
		ch <- minio.ObjectInfo{Key: o.Key}
	}
	close(ch)
	failed := map[string]bool{}
	var errs []error
	for e := range s.core.Client.RemoveObjects(ctx, s.bucket, ch, minio.RemoveObjectsOptions{}) {
		if e.Err != nil && code(e.Err) != "NoSuchKey" {
			failed[e.ObjectName] = true
			errs = append(errs, s.errorf("gc (remove)", e.ObjectName, asl.Reference{}, e.Err))
		}
	}
	n, b := 0, int64(0)
	for _, o := range objs {
		if !failed[o.Key] {
			n++
			b += o.Size
		}
	}
	return n, b, errors.Join(errs...)
}

// beginGC takes the bucket for one collection: it writes the state object
// (generation + 1, running) conditionally on the one read, reads back its
// modification time (the mark's start, T0), removes the claims of earlier
// generations and keeps the state's lease until stop is called (a lost
// lease cancels ctx). A dry run writes nothing: T0 is the state read.
func (s *Store) beginGC(ctx context.Context, cancel context.CancelCauseFunc, grace time.Duration, dry bool) (gcState, time.Time, *gcLease, error) {
	key := s.gcStateKey()
	cur, err := s.readGCState(ctx)
	if err != nil {
		return cur, time.Time{}, nil, err
	}
	if s.live(cur) {
		return cur, time.Time{}, nil, fmt.Errorf("s3store: gc s3://%s/%s: generation %d (%s) holds the bucket: %w", s.bucket, key, cur.Gen, cur.ID, ErrGCRunning)
	}
	if dry {
		// Now, in the object store's clock, is not known without a
		// write: the local clock stands in (a dry run removes nothing).
		return cur, time.Now(), nil, nil
	}
	var id [8]byte
	rand.Read(id[:])
	st := gcState{Gen: cur.Gen + 1, Running: true, ID: hex.EncodeToString(id[:]), GraceNS: int64(grace)}
	b, _ := json.Marshal(st)
	if err := s.putSmall(ctx, key, b, cur.etag, !cur.seen); err != nil {
		if errors.Is(err, errPrecondition) {
			return cur, time.Time{}, nil, fmt.Errorf("s3store: gc s3://%s/%s: another collection began: %w", s.bucket, key, ErrGCRunning)
		}
		return cur, time.Time{}, nil, err
	}
	// T0 is the state's modification time as a listing gives it (to the
	// millisecond; a HEAD gives whole seconds).
	var info minio.ObjectInfo
	for obj := range s.core.Client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: key, MaxKeys: 1}) {
		if obj.Err != nil {
			return cur, time.Time{}, nil, s.errorf("gc (read state)", key, asl.Reference{}, obj.Err)
		}
		if obj.Key == key {
			info = obj
		}
	}
	if info.Key != key {
		return cur, time.Time{}, nil, fmt.Errorf("s3store: gc s3://%s/%s: the state object written is not listed", s.bucket, key)
	}
	st.mod, st.etag, st.seen = info.LastModified, info.ETag, true
	t0 := info.LastModified
	s.removeOldClaims(ctx, st.Gen, t0)
	l := &gcLease{etagv: st.etag, done: make(chan struct{})}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		t := time.NewTicker(s.lease() / 4)
		defer t.Stop()
		for {
			select {
			case <-l.done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			l.mu.Lock()
			err := s.putSmall(ctx, key, b, l.etagv, false)
			if err == nil {
				var info minio.ObjectInfo
				if info, err = s.core.Client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{}); err == nil {
					l.etagv = info.ETag
				}
			}
			l.mu.Unlock()
			if errors.Is(err, errPrecondition) {
				cancel(fmt.Errorf("s3store: gc generation %d lost its lease on s3://%s/%s: %w", st.Gen, s.bucket, key, ErrGCRunning))
				return
			}
		}
	}()
	return st, t0, l, nil
}

// gcLease keeps a collection's state object rewritten.
type gcLease struct {
	mu    sync.Mutex
	etagv string
	done  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
}

func (l *gcLease) stop() {
	l.once.Do(func() { close(l.done) })
	l.wg.Wait()
}

func (l *gcLease) etag() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.etagv
}

// endGC writes the state object as not running (conditionally on the
// lease still held).
func (s *Store) endGC(ctx context.Context, st gcState, l *gcLease) error {
	l.stop()
	etag := l.etag()
	st.Running = false
	b, _ := json.Marshal(st)
	err := s.putSmall(ctx, s.gcStateKey(), b, etag, false)
	if errors.Is(err, errPrecondition) {
		return fmt.Errorf("s3store: gc generation %d lost its lease: %w", st.Gen, ErrGCRunning)
	}
	return err
}

// removeOldClaims removes the claims of generations before gen (best
// effort: a leftover claim is a few bytes no one reads), except the
// deletion records written less than DefaultGrace before t0, which pins
// still consult (SPECS.md §6.7).
func (s *Store) removeOldClaims(ctx context.Context, gen uint64, t0 time.Time) {
	prefix := s.prefix + "gc/claims/"
	var old []minio.ObjectInfo
	for obj := range s.core.Client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			return
		}
		if obj.Size > int64(len(claimSweep)) && !obj.LastModified.Before(t0.Add(-DefaultGrace)) {
			continue
		}
		g, err := strconv.ParseUint(strings.SplitN(strings.TrimPrefix(obj.Key, prefix), "/", 2)[0], 10, 64)
		if err == nil && g < gen {
			old = append(old, obj)
		}
	}
	if len(old) > 0 {
		s.removeObjects(ctx, old)
	}
}
