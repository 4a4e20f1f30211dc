package bundle

import (
	"context"
	"fmt"
	"io"

	"github.com/amduat/amduat/asl"
)

// Limits of Import's batching: payloads up to StreamAbove bytes are read
// into memory and stored with PutBatch, at most BatchBytes and BatchCount
// per batch (one durability barrier each); larger ones stream through Put.
const (
	DefaultBatchBytes  = 64 << 20
	DefaultBatchCount  = 4096
	DefaultStreamAbove = 4 << 20
)

// ImportStore is what Import needs of a store.
type ImportStore interface {
	asl.Receiver
	asl.BatchReceiver
}

// ImportOptions tune Import; zero values mean the defaults above.
type ImportOptions struct {
	BatchBytes, BatchCount, StreamAbove int64
	// Progress, when set, is called after each stored batch or stream
	// with the totals so far.
	Progress func(ImportStats)
	// IndexEntries, when set and the store is an asl.Indexer, gives the
	// derived index entries (SPECS.md §6.5) of each artifact stored through
	// the batch path; they are written in the same durable batch, so an
	// imported trace or edge is found as if its run had happened here.
	IndexEntries func(ref asl.Reference, a asl.Artifact) []asl.IndexEntry
}

// ImportStats counts what Import read and stored.
type ImportStats struct {
	Entries uint64 // entries read and verified
	Stored  uint64 // entries stored (all verified entries once Import returns nil)
	Bytes   uint64 // payload bytes stored
	Roots   []asl.Reference
}

// Import reads the bundle from r and stores every artifact under the
// reference the bundle gives, after checking that its bytes hash to it
// (small artifacts are checked before they reach the store; a large one
// streams into Put through the checking reader, so a mismatch fails the put
// and stores nothing). On an error, the artifacts verified before it are
// stored (they are correct), nothing else is, and the error names the entry
// that failed (*Error). Roots are checked to be among the stored artifacts
// or already present: the bundle's own entries are the usual case.
func Import(ctx context.Context, s ImportStore, r io.Reader, opt ImportOptions) (ImportStats, error) {
	if opt.BatchBytes <= 0 {
		opt.BatchBytes = DefaultBatchBytes
	}
	if opt.BatchCount <= 0 {
		opt.BatchCount = DefaultBatchCount
	}
	if opt.StreamAbove <= 0 {
		opt.StreamAbove = DefaultStreamAbove
	}
	var st ImportStats
	br, err := NewReader(r)
	if err != nil {
		return st, err
	}
	var (
		pending      []asl.Artifact
		pendingRefs  []asl.Reference
		pendingBytes int64
		pendingHash  asl.HashID
	)
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		var entries []asl.IndexEntry
		ix, indexed := s.(asl.Indexer)
		if indexed && opt.IndexEntries != nil {
			for i, a := range pending {
				entries = append(entries, opt.IndexEntries(pendingRefs[i], a)...)
			}
		}
		var refs []asl.Reference
		var err error
		if len(entries) > 0 {
			refs, err = ix.PutIndexed(ctx, pendingHash, pending, entries)
		} else {
			refs, err = s.PutBatch(ctx, pendingHash, pending)
		}
		if err != nil {
			return fmt.Errorf("import: storing %d artifacts (from %s): %w", len(pending), pendingRefs[0], err)
		}
		for i, ref := range refs {
			if ref != pendingRefs[i] {
				return fmt.Errorf("import: the store derived %s for the entry given as %s: %w", ref, pendingRefs[i], asl.ErrIntegrity)
			}
			st.Bytes += uint64(len(pending[i].Bytes))
		}
		st.Stored += uint64(len(pending))
		clear(pending)
		pending, pendingRefs, pendingBytes = pending[:0], pendingRefs[:0], 0
		if opt.Progress != nil {
			opt.Progress(st)
		}
		return nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		e, err := br.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if ferr := flush(); ferr != nil {
				return st, fmt.Errorf("%w (and %v)", err, ferr)
			}
			return st, err
		}
		if int64(e.Header.Size) > opt.StreamAbove {
			if err := flush(); err != nil {
				return st, err
			}
			ref, err := s.Put(ctx, e.Ref.HashID(), e.Header, br)
			if err != nil {
				return st, fmt.Errorf("import: entry %d (%s): %w", e.Index, e.Ref, err)
			}
			if ref != e.Ref {
				return st, fmt.Errorf("import: entry %d: the store derived %s for %s: %w", e.Index, ref, e.Ref, asl.ErrIntegrity)
			}
			// The verifying reader's last Read succeeded inside Put; make
			// the reader step past the entry.
			if _, err := br.Read(nil); err != io.EOF {
				return st, fmt.Errorf("import: entry %d (%s): %w", e.Index, e.Ref, err)
			}
			st.Entries++
			st.Stored++
			st.Bytes += e.Header.Size
			if opt.Progress != nil {
				opt.Progress(st)
			}
			continue
		}
		if e.Ref.HashID() != pendingHash || int64(len(pending)) >= opt.BatchCount || pendingBytes+int64(e.Header.Size) > opt.BatchBytes {
			if err := flush(); err != nil {
				return st, err
			}
			pendingHash = e.Ref.HashID()
		}
		buf := make([]byte, e.Header.Size)
		if _, err := io.ReadFull(br, buf); err != nil {
			if ferr := flush(); ferr != nil {
				return st, fmt.Errorf("%w (and %v)", err, ferr)
			}
			return st, err
		}
		if _, err := br.Read(nil); err != io.EOF {
			if ferr := flush(); ferr != nil {
				return st, fmt.Errorf("%w (and %v)", err, ferr)
			}
			return st, err
		}
		st.Entries++
		pending = append(pending, asl.Artifact{Bytes: buf, Tag: e.Header.Tag, HasTag: e.Header.HasTag})
		pendingRefs = append(pendingRefs, e.Ref)
		pendingBytes += int64(len(buf))
	}
	if err := flush(); err != nil {
		return st, err
	}
	st.Roots = br.Roots()
	return st, nil
}

// ExportStats counts what Export wrote.
type ExportStats struct {
	Entries uint64
	Bytes   uint64 // payload bytes
}

// Export writes a bundle to w holding the artifacts refs, in that order,
// read from f (verified as they are read) and copied with bounded memory,
// and listing roots in the trailer. A reference that cannot be read fails
// the export; the caller discards the partial output.
func Export(ctx context.Context, f asl.Fetcher, w io.Writer, refs, roots []asl.Reference, progress func(ExportStats)) (ExportStats, error) {
	var st ExportStats
	bw, err := NewWriter(w)
	if err != nil {
		return st, err
	}
	for _, ref := range refs {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		rc, hdr, err := f.Fetch(ctx, ref)
		if err != nil {
			return st, fmt.Errorf("export %s: %w", ref, err)
		}
		err = bw.AddVerified(ref, hdr, rc)
		rc.Close()
		if err != nil {
			return st, fmt.Errorf("export %s: %w", ref, err)
		}
		st.Entries++
		st.Bytes += hdr.Size
		if progress != nil {
			progress(st)
		}
	}
	if err := bw.Close(roots); err != nil {
		return st, err
	}
	return st, nil
}
