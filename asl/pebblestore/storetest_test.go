package pebblestore_test

import (
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/asl/storetest"
)

// TestStoreSuite runs the shared backend suite (asl/storetest) against the
// embedded store: with its defaults on a real directory, and with small
// chunks, inline records, packs and ingestion thresholds on an in-memory
// filesystem, so that artifacts of the suite's sizes take every write and
// read path (inline, packed, chunked, ingested, compressed or raw).
func TestStoreSuite(t *testing.T) {
	t.Parallel()
	configs := []struct {
		name string
		opts func() *pebblestore.Options
		dir  func(t *testing.T) string
	}{
		{"Defaults", func() *pebblestore.Options { return nil }, func(t *testing.T) string { return filepath.Join(t.TempDir(), "store") }},
		{"SmallChunks", func() *pebblestore.Options {
			return &pebblestore.Options{FS: vfs.NewMem(), ChunkSize: pebblestore.MinChunkSize, InlineMax: 512,
				PackMin: 1, IngestMin: 64 << 10}
		}, func(*testing.T) string { return "store" }},
	}
	for _, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, func(t *testing.T) storetest.Backend {
				s, err := pebblestore.Create(cfg.dir(t), cfg.opts())
				if err != nil {
					t.Fatalf("Create: %v", err)
				}
				t.Cleanup(func() {
					if err := s.Close(); err != nil {
						t.Errorf("Close: %v", err)
					}
				})
				return s
			})
		})
	}
}
