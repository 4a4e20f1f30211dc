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
// produced ref?"), in ascending edge-reference order.
func EdgesTo(ctx context.Context, s asl.Store, ref asl.Reference) ([]Found, error) {
	return lookup(ctx, s, ToIndexSpace, ref)
}

// EdgesFrom returns the stored edges whose from list contains ref ("what
// was computed from ref?"), in ascending edge-reference order.
func EdgesFrom(ctx context.Context, s asl.Store, ref asl.Reference) ([]Found, error) {
	return lookup(ctx, s, FromIndexSpace, ref)
}

// ErrNoIndex: the store cannot answer reverse lookups.
var ErrNoIndex = errors.New("store has no index")

func lookup(ctx context.Context, s asl.Store, space string, ref asl.Reference) ([]Found, error) {
	ix, ok := s.(asl.Indexer)
	if !ok {
		return nil, fmt.Errorf("provenance of %s: %w", ref, ErrNoIndex)
	}
	prefix := asl.AppendEncodedRef(nil, ref)
	var out []Found
	err := ix.ScanIndex(ctx, space, prefix, func(key, _ []byte) error {
		edgeRef, err := asl.DecodeReference(key[len(prefix):])
		if err != nil {
			return fmt.Errorf("index %s entry for %s: %w", space, ref, err)
		}
		a, err := asl.Get(ctx, s, edgeRef, 0)
		if err != nil {
			return fmt.Errorf("edge %s: %w", edgeRef, err)
		}
		e, err := DecodeArtifact(a)
		if err != nil {
			return fmt.Errorf("edge %s: %w", edgeRef, err)
		}
		out = append(out, Found{Ref: edgeRef, Edge: e})
		return nil
	})
	return out, err
}

// Rebuild re-creates both index spaces from the edge artifacts in the store
// (the index is derived data). It returns the number of edges indexed.
func Rebuild(ctx context.Context, s asl.Store) (int, error) {
	ix, ok := s.(asl.Indexer)
	if !ok {
		return 0, ErrNoIndex
	}
	var entries []asl.IndexEntry
	n := 0
	err := s.Enumerate(ctx, asl.Reference{}, func(info asl.Info) error {
		if !info.HasTag || info.Tag != asl.TagTGK1EdgeV1 {
			return nil
		}
		a, err := asl.Get(ctx, s, info.Ref, 0)
		if err != nil {
			return err
		}
		e, err := DecodeArtifact(a)
		if err != nil {
			return nil // not an edge this project can read; skip it
		}
		entries = append(entries, IndexEntries(e, info.Ref)...)
		n++
		return nil
	})
	if err != nil {
		return 0, err
	}
	_, err = ix.PutIndexed(ctx, asl.HashSHA256, nil, entries)
	return n, err
}
