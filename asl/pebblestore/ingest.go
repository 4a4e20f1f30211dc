package pebblestore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

const (
	// DefaultIngestMin is the artifact size from which chunks are written
	// into SSTables of their own and ingested, instead of passing through
	// Pebble's write-ahead log and memtable.
	DefaultIngestMin = 16 << 20
	// ingestFileBytes is the size at which an ingest SSTable is closed and
	// the next one started.
	ingestFileBytes = 128 << 20
	// ingestDir is the subdirectory of the store that holds SSTables being
	// written; Open empties it.
	ingestDir = "ingest"
)

// An ingester writes the chunks of large artifacts into SSTables and
// ingests them into Pebble in one step, so each chunk byte is written to
// disk once (SPECS.md §6.4, "Durability protocol"). Keys
// must be added in increasing order: the chunk keys of one blob, then those
// of a blob with a higher id. The chunks become visible (but unreferenced)
// only at ingest; the staging records of their blobs, committed before,
// are synced before the ingest so that Open can always clean up after a put
// that never committed.
type ingester struct {
	s     *Store
	w     *sstable.Writer
	n     int // value bytes in the current SSTable
	paths []string
	val   []byte
	// unsynced: some staging record was committed without sync.
	unsynced bool
}

func (s *Store) newIngester() *ingester {
	return &ingester{s: s, val: make([]byte, 0, s.chunkSize+32)}
}

// set adds key -> head || payload.
func (g *ingester) set(key, head, payload []byte) error {
	if g.w == nil {
		path := g.s.fs.PathJoin(g.s.dir, ingestDir, strconv.FormatUint(g.s.ingestSeq.Add(1), 10)+".sst")
		f, err := g.s.fs.Create(path, vfs.WriteCategoryUnspecified)
		if err != nil {
			return fmt.Errorf("creating ingest table: %w", err)
		}
		f = vfs.NewSyncingFile(f, vfs.SyncingFileOptions{BytesPerSync: 1 << 20})
		g.paths = append(g.paths, path)
		g.w = sstable.NewWriter(objstorageprovider.NewFileWritable(f), g.s.sstOpts)
	}
	g.val = append(append(g.val[:0], head...), payload...)
	if err := g.w.Set(key, g.val); err != nil {
		return fmt.Errorf("writing ingest table: %w", err)
	}
	if g.n += len(g.val); g.n >= ingestFileBytes {
		return g.closeTable()
	}
	return nil
}

// closeTable finishes (and syncs) the current SSTable.
func (g *ingester) closeTable() error {
	if g.w == nil {
		return nil
	}
	err := g.w.Close()
	g.w, g.n = nil, 0
	if err != nil {
		return fmt.Errorf("finishing ingest table: %w", err)
	}
	return nil
}

// ingest makes the staging records committed so far durable, then ingests
// the SSTables written. Nothing is left to clean up when it returns nil.
func (g *ingester) ingest(ctx context.Context) error {
	if err := g.closeTable(); err != nil {
		return err
	}
	if len(g.paths) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if g.unsynced {
		if err := g.s.db.LogData(nil, pebble.Sync); err != nil {
			return fmt.Errorf("syncing staging records: %w", ioErr(err))
		}
		g.unsynced = false
	}
	if err := g.s.db.Ingest(ctx, g.paths); err != nil {
		return fmt.Errorf("ingesting chunks: %w", ioErr(err))
	}
	g.s.commits.Add(1)
	g.paths = nil
	return nil
}

// abort removes the SSTables not ingested (what is left is removed by the
// next Open).
func (g *ingester) abort() {
	if g.w != nil {
		_ = g.w.Close()
		g.w = nil
	}
	for _, p := range g.paths {
		_ = g.s.fs.Remove(p)
	}
	g.paths = nil
}

// clearIngestDir creates the ingest directory and removes what a put that
// never finished left in it.
func (s *Store) clearIngestDir() error {
	dir := s.fs.PathJoin(s.dir, ingestDir)
	if err := s.fs.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	names, err := s.fs.List(dir)
	if err != nil {
		return fmt.Errorf("listing %s: %w", dir, err)
	}
	for _, n := range names {
		if err := s.fs.Remove(s.fs.PathJoin(dir, n)); err != nil {
			return fmt.Errorf("removing %s: %w", n, err)
		}
	}
	return nil
}
