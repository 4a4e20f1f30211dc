package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/amduat/amduat/asl"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// SalvageReport says what Salvage copied and what it could not.
type SalvageReport struct {
	// Hash is the new store's default hash: the damaged store's when its
	// config record could be read, else Options.DefaultHash (SHA-256 when
	// zero).
	Hash asl.HashID
	// Artifacts and Bytes count the artifacts copied into the new store
	// and their payload bytes; FromPacks of them were read from pack
	// records directly, the others through the damaged store's index.
	Artifacts, Bytes, FromPacks int64
	// Entries counts the index entries (SPECS.md §6.5) copied.
	Entries int64
	// MetaRecords counts the records of the metadata journal (pins and
	// their history, the run log, the cache salt; SPECS.md §6.4) replayed
	// into the new store. Tombstones are not copied (they name the old
	// packs): they keep the artifacts they deleted out of the new store.
	MetaRecords int64
	// Lost lists the artifacts the damaged store names (in a pack record's
	// head or an index record) that could not be read and verified, in
	// ascending ReferenceBytes order.
	Lost []SalvageLoss
	// Damage lists what could not be read at all, naming the file and,
	// where known, the byte or key range: each wraps asl.ErrIntegrity, or
	// is the error that kept Pebble's files from opening.
	Damage []error
}

// SalvageLoss is an artifact Salvage could not copy, with the reason.
type SalvageLoss struct {
	Ref asl.Reference
	Err error
}

// SalvageProgress is passed to Salvage's progress callback.
type SalvageProgress struct {
	Bytes, TotalBytes int64 // pack bytes scanned, of all pack bytes
	Artifacts         int64 // artifacts copied so far
}

// salvageBatch bounds the artifacts (and their bytes) that Salvage gathers
// into one PutBatch of the new store.
const (
	salvageBatch      = 1024
	salvageBatchBytes = 16 << 20
)

// Salvage copies every artifact of the store in from that can still be
// read and verified into a new store it creates in to, and reports what was
// lost (SPECS.md §6.4, "Damage"). It needs neither Pebble's files nor the
// store's config to be readable:
//
//  1. every pack is scanned record by record from its start, without the
//     index; past a record that does not check it looks for the next one
//     that does (the bytes between are reported as damage), and every
//     verified artifact is copied;
//  2. Pebble's files are opened read-only, without the OPTIONS file (which
//     Pebble regenerates; a damaged one would refuse the open), and, if that
//     fails too, without the write-ahead logs; through its index every
//     artifact not copied yet (inline, staged as chunks or packed, in any
//     layout version) is read, verified and copied, or reported lost by
//     name; damage on the way is skipped and reported, as by Enumerate;
//  3. the records of the metadata journal that check (pins and their
//     history, the run log, the cache salt) are replayed into the new
//     store; its tombstones, and those Pebble's copy still holds, keep the
//     copies they deleted out of steps 1 and 2 (SPECS.md §6.4);
//  4. the index entries that can be read are copied (those of the
//     metadata spaces only when the journal was damaged or missing).
//
// Every byte copied is verified against its reference: the new store
// holds no byte that the damaged one did not prove. to must not hold a
// store; it is created with the damaged store's default hash and the
// chunk size of opts. A failure of the new store (disk full, say) is
// returned as the error; damage to the old one never is.
func Salvage(ctx context.Context, from, to string, opts *Options, progress func(SalvageProgress)) (SalvageReport, error) {
	var rep SalvageReport
	set, err := resolve(opts)
	if err != nil {
		return rep, fmt.Errorf("salvage %s: %w", from, err)
	}
	fs := set.fs
	if st, err := fs.Stat(from); err != nil || !st.IsDir() {
		return rep, fmt.Errorf("salvage %s: %w", from, ErrNoStore)
	}
	if names, err := fs.List(to); err == nil && len(names) > 0 {
		return rep, fmt.Errorf("salvage into %s: the directory is not empty: %w", to, ErrExists)
	}
	pk, err := listPacks(fs, from)
	if err != nil {
		return rep, fmt.Errorf("salvage %s: %w", from, err)
	}
	defer pk.close()
	old := &Store{dir: from, fs: fs, hash: set.hash, chunkSize: set.chunkSize, packs: pk, drained: make(chan struct{}, 1)}
	old.idx = &indexQueue{pending: map[asl.Reference]pendingRecord{}}
	db, derrs := openSalvageDB(fs, from, set)
	rep.Damage = append(rep.Damage, derrs...)
	if db != nil {
		defer db.Close()
		old.db = db
		if v, closer, err := dbGet(db, configKey()); err == nil {
			if cfg, err := decodeConfig(v); err == nil {
				old.hash = asl.HashID(cfg.Hash)
			} else {
				rep.Damage = append(rep.Damage, fmt.Errorf("config record: %w", err))
			}
			closer.Close()
		} else if !errors.Is(err, pebble.ErrNotFound) {
			rep.Damage = append(rep.Damage, fmt.Errorf("config record: %w", ioErr(err)))
		}
	}
	if len(pk.atOpen) == 0 && db == nil {
		return rep, fmt.Errorf("salvage %s: no pack file, and Pebble's files do not open: %w", from, ErrNoStore)
	}
	rep.Hash = old.hash
	ns, err := Create(to, &Options{FS: fs, DefaultHash: old.hash, ChunkSize: set.chunkSize})
	if err != nil {
		return rep, fmt.Errorf("salvage into %s: %w", to, err)
	}
	sv := &salvager{ctx: ctx, old: old, ns: ns, rep: &rep, progress: progress, lost: map[asl.Reference]error{}}
	sv.readJournal(db)
	err = sv.packs()
	if err == nil && db != nil {
		err = sv.index()
	}
	if err == nil {
		err = sv.journal()
		rep.MetaRecords = int64(sv.meta.records)
	}
	if err == nil && db != nil {
		err = sv.entries()
	}
	if cerr := ns.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("salvage into %s: %w", to, cerr)
	}
	for ref, lerr := range sv.lost {
		rep.Lost = append(rep.Lost, SalvageLoss{Ref: ref, Err: lerr})
	}
	slices.SortFunc(rep.Lost, func(a, b SalvageLoss) int { return bytes.Compare(a.Ref.Bytes(), b.Ref.Bytes()) })
	return rep, err
}

// listPacks lists the pack files of the store in dir for reading, creating
// nothing.
func listPacks(fs vfs.FS, dir string) (*packs, error) {
	pdir := fs.PathJoin(dir, packDir)
	p := &packs{fs: fs, dir: pdir, readers: map[uint64]*packReader{}}
	names, err := fs.List(pdir)
	if errors.Is(err, os.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", pdir, err)
	}
	for _, n := range names {
		id, err := strconv.ParseUint(strings.TrimSuffix(n, packSuffix), 10, 64)
		if err == nil && strings.HasSuffix(n, packSuffix) && id != 0 && n == packName(id) {
			p.atOpen = append(p.atOpen, id)
		}
	}
	slices.Sort(p.atOpen)
	return p, nil
}

// hideFS hides files from Pebble's listing of the store's directory: the
// OPTIONS files (Pebble writes a fresh one at every open and only checks
// the old one, so a damaged one need not refuse the open) and, when logs
// is set, the write-ahead logs too (a log damaged in its middle does).
type hideFS struct {
	vfs.FS
	dir  string
	logs bool
}

func (h hideFS) List(dir string) ([]string, error) {
	names, err := h.FS.List(dir)
	if err != nil || h.FS.PathBase(dir) != h.FS.PathBase(h.dir) {
		return names, err
	}
	out := names[:0:0]
	for _, n := range names {
		if strings.HasPrefix(n, "OPTIONS-") || h.logs && strings.HasSuffix(n, ".log") {
			continue
		}
		out = append(out, n)
	}
	return out, nil
}

// openSalvageDB opens the Pebble database of the store in dir read-only,
// first without its OPTIONS files, then without its logs too. It returns
// the errors of the attempts that failed, and nil when none succeeded.
func openSalvageDB(fs vfs.FS, dir string, set settings) (*pebble.DB, []error) {
	var errs []error
	for _, logs := range []bool{false, true} {
		po := pebbleOptions(set)
		po.FS = hideFS{FS: fs, dir: dir, logs: logs}
		po.ReadOnly = true
		po.ErrorIfNotExists = true
		// Never ratchet the format of a store being salvaged.
		po.FormatMajorVersion = pebble.FormatMinSupported
		db, err := pebble.Open(dir, po)
		if err == nil {
			return db, errs
		}
		what := "Pebble's files (OPTIONS set aside)"
		if logs {
			what = "Pebble's files (OPTIONS and write-ahead logs set aside)"
		}
		errs = append(errs, fmt.Errorf("%s do not open: %w", what, pebbleOpenErr(err)))
	}
	return nil, errs
}

// salvager carries one Salvage.
type salvager struct {
	ctx      context.Context
	old, ns  *Store
	rep      *SalvageReport
	progress func(SalvageProgress)
	lost     map[asl.Reference]error // named but not copied (yet)
	meta     *salvageMeta            // the old store's journal (salvage_meta.go)

	batch      map[asl.HashID][]salvaged // whole artifacts to put, by hash
	inBatch    map[asl.Reference]bool
	batchN     int
	batchBytes int
	scanned    int64
	total      int64
}

type salvaged struct {
	ref asl.Reference
	a   asl.Artifact
}

// copied records a copy of ref (payload size bytes).
func (sv *salvager) copied(ref asl.Reference, size uint64, fromPacks bool) {
	delete(sv.lost, ref)
	sv.rep.Artifacts++
	sv.rep.Bytes += int64(size)
	if fromPacks {
		sv.rep.FromPacks++
	}
}

// report calls the progress callback.
func (sv *salvager) report() {
	if sv.progress != nil {
		sv.progress(SalvageProgress{Bytes: sv.scanned, TotalBytes: sv.total, Artifacts: sv.rep.Artifacts})
	}
}

// have reports whether ref is copied already (or about to be).
func (sv *salvager) have(ref asl.Reference) (bool, error) {
	if sv.inBatch[ref] {
		return true, nil
	}
	return sv.ns.anyStoredRefs([]asl.Reference{ref})
}

// fail records that ref could not be copied, unless it was.
func (sv *salvager) fail(ref asl.Reference, err error) {
	if has, _ := sv.have(ref); !has {
		sv.lost[ref] = err
	}
}

// add gathers a verified whole artifact for the next PutBatch.
func (sv *salvager) add(ref asl.Reference, a asl.Artifact) error {
	if has, err := sv.have(ref); err != nil || has {
		return err
	}
	if sv.batch == nil {
		sv.batch, sv.inBatch = map[asl.HashID][]salvaged{}, map[asl.Reference]bool{}
	}
	sv.batch[ref.HashID()] = append(sv.batch[ref.HashID()], salvaged{ref, a})
	sv.inBatch[ref] = true
	sv.batchN++
	sv.batchBytes += len(a.Bytes)
	if sv.batchN >= salvageBatch || sv.batchBytes >= salvageBatchBytes {
		return sv.flush()
	}
	return nil
}

// flush puts the gathered artifacts into the new store.
func (sv *salvager) flush() error {
	ids := make([]asl.HashID, 0, len(sv.batch))
	for id := range sv.batch {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		items := sv.batch[id]
		arts := make([]asl.Artifact, len(items))
		for i, it := range items {
			arts[i] = it.a
		}
		refs, err := sv.ns.PutBatch(sv.ctx, id, arts)
		if err != nil {
			return fmt.Errorf("salvage into %s: %w", sv.ns.dir, err)
		}
		for i, it := range items {
			if refs[i] != it.ref {
				return fmt.Errorf("salvage: %s was put as %s", it.ref, refs[i])
			}
			sv.copied(it.ref, uint64(len(it.a.Bytes)), true)
		}
	}
	clear(sv.batch)
	clear(sv.inBatch)
	sv.batchN, sv.batchBytes = 0, 0
	sv.report()
	return nil
}

// packs copies every verified artifact of every pack.
func (sv *salvager) packs() error {
	pk := sv.old.packs
	sizes := make([]uint64, len(pk.atOpen))
	for i, id := range pk.atOpen {
		st, err := pk.fs.Stat(pk.fs.PathJoin(pk.dir, packName(id)))
		if err != nil {
			sv.rep.Damage = append(sv.rep.Damage, fmt.Errorf("pack %d: %w", id, err))
			continue
		}
		sizes[i] = uint64(st.Size())
		sv.total += st.Size()
	}
	for i, id := range pk.atOpen {
		size := sizes[i]
		if size == 0 {
			continue
		}
		if err := sv.pack(id, size); err != nil {
			return err
		}
	}
	return sv.flush()
}

// pack copies the verified artifacts of pack id, of size bytes.
func (sv *salvager) pack(id, size uint64) error {
	pk := sv.old.packs
	r, err := pk.reader(id)
	if err != nil {
		sv.rep.Damage = append(sv.rep.Damage, fmt.Errorf("pack %d: %w", id, err))
		return nil
	}
	var magic [len(packMagic)]byte
	if _, err := r.ReadAt(magic[:], 0); err != nil || magic != packMagic {
		sv.rep.Damage = append(sv.rep.Damage, damaged("pack %d: no pack magic at its start", id))
	}
	done := uint64(0)
	for p := uint64(len(packMagic)); p < size; {
		if err := sv.ctx.Err(); err != nil {
			return err
		}
		sc, err := pk.scan(id, p)
		if err != nil {
			if !errors.Is(err, asl.ErrIntegrity) {
				return fmt.Errorf("salvage: %w", err)
			}
			q := pk.resync(id, p+1, size)
			if sc.kind == recordSingle || sc.kind == recordLarge {
				sv.fail(sc.ref, err)
			} else if q < size {
				// A head that names no artifact, repaired to name it.
				if ref, ok := pk.nameDamaged(id, p, q); ok {
					sv.fail(ref, err)
				}
			}
			sv.rep.Damage = append(sv.rep.Damage, fmt.Errorf("pack %d (%s): bytes %d to %d hold no record that checks: %w", id, packName(id), p, q, err))
			p = q
			continue
		}
		if (sc.kind == recordSingle || sc.kind == recordLarge) && sv.deleted(id, sc.rec) {
			// Deleted (a tombstone lists it): not salvaged back.
			p = sc.next
			continue
		}
		switch sc.kind {
		case recordSingle:
			if err := sv.add(sc.ref, asl.Artifact{Bytes: sc.data, HasTag: sc.rec.Tag != nil, Tag: sc.rec.header().Tag}); err != nil {
				return err
			}
		case recordLarge:
			if err := sv.large(sc.ref, sc.rec); err != nil {
				return err
			}
		}
		p = sc.next
		if p-done >= 1<<20 {
			sv.scanned += int64(p - done)
			done = p
			sv.report()
		}
	}
	sv.scanned += int64(size - done)
	return nil
}

// large copies a verified large artifact from its parts: read and verified
// once whole, then streamed into the new store.
func (sv *salvager) large(ref asl.Reference, rec indexRecord) error {
	if has, err := sv.have(ref); err != nil || has {
		return err
	}
	pr, pw := io.Pipe()
	go func() {
		_, err := sv.old.packs.checkParts(ref, &rec, func(b []byte) error {
			_, err := pw.Write(b)
			return err
		})
		pw.CloseWithError(err)
	}()
	got, err := sv.ns.Put(sv.ctx, ref.HashID(), rec.header(), pr)
	pr.CloseWithError(io.ErrClosedPipe)
	switch {
	case errors.Is(err, asl.ErrIntegrity):
		// The parts checked when scanned: they changed since.
		sv.fail(ref, err)
		return nil
	case err != nil:
		return fmt.Errorf("salvage into %s: %w", sv.ns.dir, err)
	case got != ref:
		return fmt.Errorf("salvage: %s was put as %s", ref, got)
	}
	sv.copied(ref, rec.Size, true)
	return nil
}

// index copies, through the damaged store's index, every artifact it names
// that the packs did not give: those stored inline or as chunks in Pebble
// (format versions 1 and 2), and reports the named ones that cannot be read.
func (sv *salvager) index() error {
	var fatal error
	damage, err := sv.old.walkRange(sv.ctx, []byte{prefixIndex}, []byte{prefixIndex + 1}, func(k, v []byte) error {
		ref, err := asl.DecodeReference(k[1:])
		if err != nil {
			sv.rep.Damage = append(sv.rep.Damage, fmt.Errorf("index key %x: %w", k, err))
			return nil
		}
		if has, err := sv.ns.anyStoredRefs([]asl.Reference{ref}); err != nil || has {
			return err
		}
		if rec, _, err := decodeIndexHead(v); err == nil && rec.packed() && sv.deleted(rec.Pack, rec) {
			return nil // deleted; the index record outlived its tombstone's commit
		}
		if !ref.Known() {
			sv.lost[ref] = fmt.Errorf("hash id 0x%04x: %w", uint16(ref.HashID()), asl.ErrUnsupported)
			return nil
		}
		rc, hdr, err := sv.old.Fetch(sv.ctx, ref)
		if err != nil {
			if !asl.IsContentError(err) {
				fatal = err
				return err
			}
			sv.lost[ref] = err
			return nil
		}
		got, err := sv.ns.Put(sv.ctx, ref.HashID(), hdr, rc)
		rc.Close()
		switch {
		case err != nil && asl.IsContentError(err):
			sv.lost[ref] = err
		case err != nil:
			fatal = fmt.Errorf("salvage into %s: %w", sv.ns.dir, err)
			return fatal
		case got != ref:
			fatal = fmt.Errorf("salvage: %s was put as %s", ref, got)
			return fatal
		default:
			sv.copied(ref, hdr.Size, false)
		}
		return nil
	})
	sv.rep.Damage = append(sv.rep.Damage, damage...)
	if fatal != nil {
		return fatal
	}
	if err != nil && !asl.IsContentError(err) {
		return fmt.Errorf("salvage: walking the index: %w", err)
	}
	sv.report()
	return nil
}

// entries copies the index entries (SPECS.md §6.5) that can be read.
func (sv *salvager) entries() error {
	var batch []asl.IndexEntry
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if _, err := sv.ns.PutIndexed(sv.ctx, sv.old.hash, nil, batch); err != nil {
			return fmt.Errorf("salvage into %s: %w", sv.ns.dir, err)
		}
		sv.rep.Entries += int64(len(batch))
		batch = batch[:0]
		return nil
	}
	damage, err := sv.old.walkRange(sv.ctx, []byte{prefixIndexEntry}, []byte{prefixIndexEntry + 1}, func(k, v []byte) error {
		space, key, ok := bytes.Cut(k[1:], []byte{0})
		if !ok || len(space) == 0 {
			sv.rep.Damage = append(sv.rep.Damage, damaged("index entry key %x", k))
			return nil
		}
		if sv.skipEntry(string(space)) {
			return nil // the journal gave it
		}
		batch = append(batch, asl.IndexEntry{Space: string(space), Key: bytes.Clone(key), Value: bytes.Clone(v)})
		if len(batch) >= salvageBatch {
			return flush()
		}
		return nil
	})
	sv.rep.Damage = append(sv.rep.Damage, damage...)
	if err != nil {
		if strings.HasPrefix(err.Error(), "salvage into") {
			return err
		}
		sv.rep.Damage = append(sv.rep.Damage, fmt.Errorf("index entries: %w", err))
	}
	return flush()
}
