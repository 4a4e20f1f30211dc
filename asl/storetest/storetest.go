// Package storetest is the backend test suite every asl.Store runs (in the
// manner of Perkeep's storagetest): a guarantee it proves for one backend
// is proven for all of them. It checks the store semantics of SPECS.md §6:
// References derived as §5.1 says, idempotent and batched puts, the
// payload length rule, Stat, Enumerate order, the three store errors, the
// index capability of §6.5, integrity on read, concurrency and
// cancellation.
//
// A backend's test calls Run with a function that opens a fresh, empty
// backend; every subtest opens its own. Optional capabilities are found by
// type assertion on what open returns: asl.Indexer, IndexSeeder and
// Corrupter. Subtests that need a capability the backend lacks are skipped.
package storetest

import (
	"context"
	"testing"

	"github.com/amduat/amduat/asl"
)

// Backend is one opened backend under test. The suite discovers optional
// capabilities by type assertion: asl.Indexer, IndexSeeder, Corrupter.
type Backend interface {
	asl.Store
}

// IndexSeeder is implemented by a Backend whose asl.Indexer reads an index
// it cannot write (its PutIndexed reports asl.ErrUnsupported, as the HTTP
// client's does): SeedIndex writes artifacts and entries behind the
// backend, into the store it reads, so that the suite can check lookups and
// scans through the backend.
type IndexSeeder interface {
	SeedIndex(ctx context.Context, id asl.HashID, arts []asl.Artifact, entries []asl.IndexEntry) error
}

// Corrupter is implemented by a Backend that can damage a stored artifact
// for the integrity tests: Corrupt replaces the stored bytes of ref with b
// and reports whether ref was present. Reads of ref must then fail with
// asl.ErrIntegrity (SPECS.md §6.2). memstore and pebblestore have it; a
// remote backend's test can forward it to the store behind the server.
type Corrupter interface {
	Corrupt(ref asl.Reference, b []byte) bool
}

// ChunkSize is the embedded store's default chunk size; the round trip
// sizes straddle it, where a chunking backend changes its path.
const ChunkSize = 256 << 10

// Run runs the suite. open must return a fresh, empty backend and arrange
// (t.Cleanup) to close it.
func Run(t *testing.T, open func(t *testing.T) Backend) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.fn(t, open(t))
		})
	}
}

var cases = []struct {
	name string
	fn   func(t *testing.T, b Backend)
}{
	{"Vectors", testVectors},
	{"RoundTrip", testRoundTrip},
	{"IdempotentPut", testIdempotentPut},
	{"Batch", testBatch},
	{"NotFound", testNotFound},
	{"Unsupported", testUnsupported},
	{"ZeroReference", testZeroReference},
	{"Enumerate", testEnumerate},
	{"PayloadLength", testPayloadLength},
	{"ReaderError", testReaderError},
	{"Canceled", testCanceled},
	{"CanceledMidStream", testCanceledMidStream},
	{"Concurrent", testConcurrent},
	{"Index", testIndex},
	{"Integrity", testIntegrity},
}
