package asl

import "context"

// IndexEntry is one store-side index record: a key in a named space mapped
// to a value. Index records are derived data (SPECS.md §6.5): every space
// this project defines can be rebuilt from artifact content, so they are
// not content-addressed and are never part of a normative encoding.
type IndexEntry struct {
	Space string
	Key   []byte
	Value []byte
}

// Indexer is an optional store capability, discovered by type assertion.
// PutIndexed stores artifacts and index entries behind one durability
// barrier: when it returns nil, all of them are durable. An entry overwrites
// any earlier value for its (Space, Key).
type Indexer interface {
	PutIndexed(ctx context.Context, id HashID, arts []Artifact, entries []IndexEntry) ([]Reference, error)
	// LookupIndex returns the value for (space, key); ok is false when absent.
	LookupIndex(ctx context.Context, space string, key []byte) (value []byte, ok bool, err error)
	// ScanIndex visits the entries of space whose key starts with prefix, in
	// ascending key order.
	ScanIndex(ctx context.Context, space string, prefix []byte, fn func(key, value []byte) error) error
}

// IndexSeeker is an optional capability of an Indexer, discovered by type
// assertion: ScanIndexAfter is ScanIndex from the first key strictly after
// after (nil: from the start of prefix), so that a scan resumed page by
// page costs what it returns, not everything before it.
type IndexSeeker interface {
	ScanIndexAfter(ctx context.Context, space string, prefix, after []byte, fn func(key, value []byte) error) error
}
