package tgk

import (
	"context"
	"errors"
	"fmt"

	"github.com/amduat/amduat/asl"
)

// Index spaces (SPECS.md §17.2). Keys are EncodedRef(endpoint) ||
// ReferenceBytes(edge); values are empty. The EncodedRef prefix makes keys
// of different endpoints prefix-free, so a scan by endpoint is exact.
const (
	FromIndexSpace = "tgk.from" // endpoint in an edge's from list -> edge
	ToIndexSpace   = "tgk.to"   // endpoint in an edge's to list -> edge
)

// IndexEntries returns the index entries recording edge e stored as edgeRef.
func IndexEntries(e Edge, edgeRef asl.Reference) []asl.IndexEntry {
	var out []asl.IndexEntry
	add := func(space string, list []Endpoint) {
		seen := map[asl.Reference]bool{}
		for _, ep := range list {
			if seen[ep.Ref] {
				continue
			}
			seen[ep.Ref] = true
			key := asl.AppendEncodedRef(nil, ep.Ref)
			out = append(out, asl.IndexEntry{Space: space, Key: edgeRef.AppendBytes(key)})
		}
	}
	add(FromIndexSpace, e.From)
	add(ToIndexSpace, e.To)
	return out
}

// Found is an edge found by a reverse lookup.
type Found struct {
	Ref  asl.Reference
	Edge Edge
}

// EdgesTo returns the stored edges whose to list contains ref ("what
// produced ref?"), in ascending edge-reference order, and the references of
// indexed edges that could not be read (missing, damaged or undecodable).
func EdgesTo(ctx context.Context, s asl.Store, ref asl.Reference) ([]Found, []asl.Reference, error) {
	return lookup(ctx, s, ToIndexSpace, ref)
}

// EdgesFrom returns the stored edges whose from list contains ref ("what
// was computed from ref?"), like EdgesTo.
func EdgesFrom(ctx context.Context, s asl.Store, ref asl.Reference) ([]Found, []asl.Reference, error) {
	return lookup(ctx, s, FromIndexSpace, ref)
}

// ErrNoIndex: the store cannot answer reverse lookups.
var ErrNoIndex = errors.New("store has no index")

func lookup(ctx context.Context, s asl.Store, space string, ref asl.Reference) ([]Found, []asl.Reference, error) {
	ix, ok := s.(asl.Indexer)
	if !ok {
		return nil, nil, fmt.Errorf("provenance of %s: %w", ref, ErrNoIndex)
	}
	prefix := asl.AppendEncodedRef(nil, ref)
	var out []Found
	var bad []asl.Reference
	err := ix.ScanIndex(ctx, space, prefix, func(key, _ []byte) error {
		edgeRef, err := asl.DecodeReference(key[len(prefix):])
		if err != nil {
			return nil // a malformed entry is derived data gone bad: ignore it
		}
		a, err := asl.Get(ctx, s, edgeRef, 0)
		if err == nil {
			var e Edge
			if e, err = DecodeArtifact(a); err == nil {
				out = append(out, Found{Ref: edgeRef, Edge: e})
				return nil
			}
		}
		if asl.IsContentError(err) {
			bad = append(bad, edgeRef)
			return nil
		}
		return fmt.Errorf("edge %s: %w", edgeRef, err)
	})
	return out, bad, err
}

// hasEdges reports whether any entry of space names ref, without reading
// the edges.
func hasEdges(ctx context.Context, s asl.Store, space string, ref asl.Reference) (bool, error) {
	ix, ok := s.(asl.Indexer)
	if !ok {
		return false, fmt.Errorf("provenance of %s: %w", ref, ErrNoIndex)
	}
	errStop := errors.New("stop")
	err := ix.ScanIndex(ctx, space, asl.AppendEncodedRef(nil, ref), func(_, _ []byte) error { return errStop })
	if err == errStop {
		return true, nil
	}
	return false, err
}

// rebuildChunk bounds the index entries one Rebuild write holds.
const rebuildChunk = 10000

// Rebuild adds the index entries of every readable edge artifact in the
// store (the index is derived data). Edges that cannot be read are skipped
// and counted; entries are written in chunks, so memory stays bounded. It
// does not delete entries whose edges are gone: lookups skip those.
func Rebuild(ctx context.Context, s asl.Store) (indexed, skipped int, err error) {
	ix, ok := s.(asl.Indexer)
	if !ok {
		return 0, 0, ErrNoIndex
	}
	var entries []asl.IndexEntry
	flush := func() error {
		if len(entries) == 0 {
			return nil
		}
		_, err := ix.PutIndexed(ctx, asl.HashSHA256, nil, entries)
		entries = entries[:0]
		return err
	}
	err = s.Enumerate(ctx, asl.Reference{}, func(info asl.Info) error {
		if !info.HasTag || info.Tag != asl.TagTGK1EdgeV1 {
			return nil
		}
		a, err := asl.Get(ctx, s, info.Ref, 0)
		var e Edge
		if err == nil {
			e, err = DecodeArtifact(a)
		}
		if err != nil {
			if asl.IsContentError(err) {
				skipped++
				return nil
			}
			return err
		}
		entries = append(entries, IndexEntries(e, info.Ref)...)
		indexed++
		if len(entries) >= rebuildChunk {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	return indexed, skipped, err
}
