package httpstore_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/asl/storetest"
	"github.com/amduat/amduat/server"
)

// backend is what the server serves and what the suite's hooks reach
// behind the client.
type backend interface {
	server.Backend
	Corrupt(ref asl.Reference, b []byte) bool
}

// mem gives memstore the DefaultHash the server needs.
type mem struct{ *memstore.Store }

func (mem) DefaultHash() asl.HashID { return asl.HashSHA256 }

// remote is the Client under test, with the suite's hooks forwarded to the
// store behind the server: the client's index is read-only (PutIndexed is
// unsupported), and damage is done to the server's store.
type remote struct {
	*httpstore.Client
	store backend
}

func (r remote) SeedIndex(ctx context.Context, id asl.HashID, arts []asl.Artifact, entries []asl.IndexEntry) error {
	_, err := r.store.PutIndexed(ctx, id, arts, entries)
	return err
}

func (r remote) Corrupt(ref asl.Reference, b []byte) bool { return r.store.Corrupt(ref, b) }

// serve starts the server over st and opens a client of it.
func serve(t *testing.T, st backend, cfg server.Config, opts httpstore.Options) (*httpstore.Client, *httptest.Server) {
	t.Helper()
	cfg.Store = st
	s, err := server.New(cfg)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	c, err := httpstore.Open(t.Context(), ts.URL, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", ts.URL, err)
	}
	t.Cleanup(func() { c.Close() })
	return c, ts
}

func newPebble(t *testing.T) backend {
	st, err := pebblestore.Create(filepath.Join(t.TempDir(), "store"), nil)
	if err != nil {
		t.Fatalf("pebblestore.Create: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestStoreSuite runs the shared backend suite (asl/storetest) against the
// client over the server of SPECS.md §18, with the server's defaults and
// the client's, and with small pages, batches and limits that make every
// listing, scan and batch take many requests.
func TestStoreSuite(t *testing.T) {
	t.Parallel()
	configs := []struct {
		name  string
		store func(t *testing.T) backend
		cfg   server.Config
		opts  httpstore.Options
	}{
		{"Pebble", newPebble, server.Config{}, httpstore.Options{}},
		{"MemSmallPages", func(*testing.T) backend { return mem{memstore.New()} },
			server.Config{Limits: server.Limits{MaxListLimit: 50, MaxBatchCount: 64, MaxBatchBytes: 1 << 20}},
			httpstore.Options{PageSize: 7, BatchCount: 16, BatchBytes: 300 << 10}},
	}
	for _, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, func(t *testing.T) storetest.Backend {
				st := cfg.store(t)
				c, _ := serve(t, st, cfg.cfg, cfg.opts)
				return remote{c, st}
			})
		})
	}
}
