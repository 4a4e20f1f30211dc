package pebblestore

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Defaults for the tuning knobs in Options.
const (
	DefaultChunkSize       = 256 << 10
	DefaultInlineMax       = 16 << 10
	DefaultMinCompressSize = 4 << 10
	DefaultMemTableSize    = 8 << 20
	DefaultCacheSize       = 32 << 20

	// stageBatchBytes is how many chunk bytes a streaming put gathers into
	// one unsynced Pebble batch.
	stageBatchBytes = 2 << 20
	// blobLease is how many blob ids one persisted counter update reserves.
	blobLease = 1 << 12
)

// Options configures Create and Open. The zero value (or nil) is valid.
type Options struct {
	// DefaultHash is recorded at Create and returned by DefaultHash(); zero
	// means asl.HashSHA256. Open ignores it and uses the recorded one.
	DefaultHash asl.HashID
	// FS lets tests use vfs.NewMem / vfs.NewCrashableMem; nil = vfs.Default.
	FS vfs.FS

	// ChunkSize is the raw size of the chunks large artifacts are split
	// into: 0 means DefaultChunkSize; it must lie in [MinChunkSize,
	// MaxChunkSize]. Each artifact records its own chunk size, so a store
	// reads artifacts written with any chunk size.
	ChunkSize int
	// InlineMax is the largest artifact stored inside its index record
	// rather than as a chunk: 0 means DefaultInlineMax, negative means none.
	// It is capped at ChunkSize.
	InlineMax int
	// MinCompressSize is the smallest chunk zstd is tried on: 0 means
	// DefaultMinCompressSize; it is raised to at least 512 bytes.
	MinCompressSize int
	// DisableCompression stores every chunk raw.
	DisableCompression bool
	// MemTableSize is Pebble's memtable size: 0 means DefaultMemTableSize.
	// Pebble keeps at most two before it stalls writes, so it bounds much
	// of the write memory.
	MemTableSize uint64
	// CacheSize is the bytes of table blocks Pebble's block cache holds:
	// 0 means DefaultCacheSize. Pebble charges its memtables to the same
	// cache; the store adds two MemTableSize to it, so that they do not
	// take the blocks' room.
	CacheSize int64
	// IngestMin applies only when PackMin is negative: the artifact size
	// from which chunks bypass Pebble's write-ahead log: they are written
	// into SSTables that are ingested, so each byte reaches the disk once.
	// 0 means DefaultIngestMin, negative means never.
	IngestMin int64
	// PackMin is the payload size of one Put or PutBatch from which its
	// artifacts are appended to a pack file (synced) and only their index
	// records go through Pebble, so each payload byte is written once and
	// every acknowledged artifact lies in a file the store checks and
	// Open rebuilds the index from (SPECS.md §6.4). 0 means DefaultPackMin:
	// every put is packed, artifacts larger than one chunk too. A positive
	// value keeps the artifacts of smaller puts in Pebble's log and tables
	// (inline or as chunks), and a negative one writes the version 2 layout
	// throughout (nothing packed; large artifacts staged in Pebble or
	// ingested, see IngestMin): both give up the guarantee that damage to
	// Pebble's files loses no acknowledged artifact, and exist to measure
	// and test that layout, which the store still reads.
	PackMin int64

	// ReadOnly makes Open open the store without creating, changing,
	// syncing or locking any file (SPECS.md §6.6): it works on a read-only
	// directory or file system, beside other readers and beside a writer,
	// and needs no free space. The store is a snapshot as of the open,
	// including commits that are only in Pebble's log and verified pack
	// records no index record names yet (indexed in memory). Writes fail
	// with ErrReadOnly. Create ignores it.
	ReadOnly bool
	// ReserveSize is the size of the reserve file a store opened for
	// writing keeps so that it can fail cleanly when its file system fills
	// up (SPECS.md §6.6): 0 means three memtables (DefaultReserveMemTables
	// times MemTableSize), negative means none. Open fails with ErrNoSpace
	// when a missing reserve cannot be allocated.
	ReserveSize int64
	// OnRebuild, if set, is called when a writable Open found Pebble's
	// files damaged and rebuilt the index from the packs (SPECS.md §6.4,
	// "Rebuilding the index"), with what it did; the CLI prints it on
	// stderr. Store.Rebuilt returns the same.
	OnRebuild func(RebuildReport)

	// tableBlockSize, when positive, is the target size of the data
	// blocks of the tables Pebble writes (its Levels[i].BlockSize); zero
	// keeps Pebble's default of 4 KiB. Only tests set it: on every read of
	// a damaged block Pebble searches the block for a single flipped bit,
	// 8 checksums of the whole block per byte, and the damage tests read
	// damaged blocks many times (issue 25).
	tableBlockSize int
}

// DefaultReserveMemTables is the default reserve size in memtables: room for
// Pebble to flush the two memtables it keeps and rotate its log once the
// file system is full.
const DefaultReserveMemTables = 3

// ErrNoStore: Open was given a directory that holds no initialized store.
var ErrNoStore = errors.New("no store")

// ErrExists: Create was given a directory that already holds a store.
var ErrExists = errors.New("store exists")

// ErrClosed: the store was used after Close.
var ErrClosed = errors.New("store closed")

// The errors of sharing a store and of running out of space (ErrLocked,
// ErrReadOnly, ErrStale, ErrNoSpace) are in open.go and space.go.

// Store is the embedded Pebble store. It is safe for concurrent use.
type Store struct {
	db   *pebble.DB
	dir  string
	hash asl.HashID

	chunkSize   int
	inlineMax   int
	minCompress int

	// state counts operations in flight; closedBit marks Close.
	state   atomic.Int64
	drained chan struct{}

	blobMu   sync.Mutex
	nextBlob uint64
	leaseEnd uint64

	stageBytes int    // chunk bytes per unsynced staging batch
	ingestMin  uint64 // artifacts at least this large are ingested
	packMin    int64  // batches of at least this many payload bytes are packed
	packs      *packs
	idx        *indexQueue // index commits of packed batches
	fs         vfs.FS
	sstOpts    sstable.WriterOptions // for ingest SSTables
	ingestSeq  atomic.Uint64         // names ingest SSTables

	claims [256]claimShard
	bufs   sync.Pool // *[]byte of capacity chunkSize

	commits       atomic.Uint64 // Pebble batch commits, for tests
	recovered     int           // staged blobs deleted by Open
	packRecovered int           // pack records indexed by Open
	packDamaged   int           // damaged pack regions Open found before records that check
	fullRescan    bool          // Open rescanned every pack record (checkMetadata)
	unsynced      atomic.Bool   // a commit relied on a pack's sync

	// gcMu is held for reading by every put (for its whole duration) and
	// for writing by the garbage collector for its whole run; gcReadMu
	// likewise by the index lookup of every Fetch and Stat. gcLive, set
	// while a collection runs, records every reference put, fetched or
	// stated meanwhile: those are kept (gc.go).
	gcMu     sync.RWMutex
	gcReadMu sync.RWMutex
	gcLive   atomic.Pointer[liveSet]
	gcRun    sync.Mutex // one collection at a time

	rebuilt  *RebuildReport // Open rebuilt the index from the packs (heal.go)
	readOnly bool           // opened with Options.ReadOnly
	roIndex  *pebble.Batch  // read-only: index records of pack records found by Open, for Enumerate
	lock     *pebble.Lock   // the store's lock (writable stores)
	space    *spaceGuard    // out-of-space handling (writable stores)
	meta     *metaState     // the metadata journal (meta.go)
}

var _ asl.Store = (*Store)(nil)

const closedBit = int64(1) << 62

type settings struct {
	fs          vfs.FS
	hash        asl.HashID
	chunkSize   int
	inlineMax   int
	minCompress int
	memTable    uint64
	cache       int64
	ingestMin   uint64
	packMin     int64
	readOnly    bool
	reserve     int64
	// fullRescan: Pebble may have lost index records below the packs'
	// watermarks (checkMetadata); Open rebuilds them from every pack.
	fullRescan bool
	tableBlock int // Options.tableBlockSize
}

func resolve(opts *Options) (settings, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	s := settings{fs: o.FS, hash: o.DefaultHash, chunkSize: o.ChunkSize, inlineMax: o.InlineMax,
		minCompress: o.MinCompressSize, memTable: o.MemTableSize, cache: o.CacheSize, readOnly: o.ReadOnly,
		tableBlock: o.tableBlockSize}
	if s.fs == nil {
		s.fs = vfs.Default
	}
	if s.hash == 0 {
		s.hash = asl.HashSHA256
	}
	if _, ok := asl.LookupHash(s.hash); !ok {
		return settings{}, fmt.Errorf("default hash id 0x%04x: %w", uint16(s.hash), asl.ErrUnsupported)
	}
	if s.chunkSize == 0 {
		s.chunkSize = DefaultChunkSize
	}
	if s.chunkSize < MinChunkSize || s.chunkSize > MaxChunkSize {
		return settings{}, fmt.Errorf("chunk size %d outside [%d, %d]", s.chunkSize, MinChunkSize, MaxChunkSize)
	}
	switch {
	case s.inlineMax == 0:
		s.inlineMax = DefaultInlineMax
	case s.inlineMax < 0:
		s.inlineMax = -1
	}
	s.inlineMax = min(s.inlineMax, s.chunkSize)
	switch {
	case o.DisableCompression:
		s.minCompress = 0
	case s.minCompress == 0:
		s.minCompress = DefaultMinCompressSize
	default:
		s.minCompress = max(s.minCompress, 512)
	}
	if s.memTable == 0 {
		s.memTable = DefaultMemTableSize
	}
	if s.cache == 0 {
		s.cache = DefaultCacheSize
	}
	switch {
	case o.PackMin == 0:
		s.packMin = DefaultPackMin // 0: everything packed
	case o.PackMin < 0:
		s.packMin = -1
	default:
		s.packMin = o.PackMin
	}
	switch {
	case o.ReserveSize == 0:
		s.reserve = DefaultReserveMemTables * int64(s.memTable)
	case o.ReserveSize > 0:
		s.reserve = o.ReserveSize
	}
	switch {
	case o.IngestMin == 0:
		s.ingestMin = DefaultIngestMin
	case o.IngestMin < 0:
		s.ingestMin = math.MaxUint64
	default:
		s.ingestMin = uint64(o.IngestMin)
	}
	return s, nil
}

// quietLogger drops Pebble's informational and error logs so command-line
// output stays clean; errors reach callers through return values. Fatalf
// marks a broken Pebble invariant and panics.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)           {}
func (quietLogger) Errorf(string, ...any)          {}
func (quietLogger) Fatalf(format string, a ...any) { panic(fmt.Sprintf("pebble: "+format, a...)) }

func pebbleOptions(s settings) *pebble.Options {
	o := &pebble.Options{
		FS:                          s.fs,
		Logger:                      quietLogger{},
		FormatMajorVersion:          pebble.FormatNewest,
		MemTableSize:                s.memTable,
		MemTableStopWritesThreshold: 2,
		// Pebble charges its memtables to the block cache; they come on
		// top of the blocks, so that s.cache bytes hold table blocks.
		CacheSize:             s.cache + 2*int64(s.memTable),
		L0CompactionThreshold: 4,
		WALBytesPerSync:       1 << 20,
		BytesPerSync:          1 << 20,
		EventListener: &pebble.EventListener{
			// A corrupt block surfaces as a read error (mapped to
			// ErrIntegrity); the default listener would exit the process.
			DataCorruption:  func(pebble.DataCorruptionInfo) {},
			BackgroundError: func(error) {},
		},
	}
	o.Experimental.EnableColumnarBlocks = func() bool { return true }
	// The chunk keys of a fresh blob hold no data anywhere in the LSM, but
	// an older table's bounds may straddle them; splitting that table lets
	// an ingested table go straight to the bottom level.
	o.Experimental.IngestSplit = func() bool { return true }
	// Chunk values go to blob files at flush, so compactions move only keys
	// and small values.
	o.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
		return pebble.ValueSeparationPolicy{
			Enabled:               true,
			MinimumSize:           s.inlineMax + 1 + 64,
			MaxBlobReferenceDepth: 10,
			RewriteMinimumAge:     5 * time.Minute,
			TargetGarbageRatio:    0.2,
		}
	}
	// Stored payloads are already zstd or incompressible; Pebble's own
	// block compression would only spend CPU.
	for i := range o.Levels {
		o.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.NoCompression }
		o.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		if s.tableBlock > 0 {
			o.Levels[i].BlockSize = s.tableBlock
		}
	}
	return o
}

// Create initializes a store in dir (creating dir if needed) and writes its
// config record. It fails with ErrExists when dir already holds a store, and
// refuses a non-empty directory that is not a Pebble database. It takes the
// store's lock (ErrLocked when another process holds it) and allocates its
// reserve (ErrNoSpace when there is no room for it; SPECS.md §6.6).
func Create(dir string, opts *Options) (*Store, error) {
	s, err := resolve(opts)
	if err != nil {
		return nil, fmt.Errorf("create store %s: %w", dir, err)
	}
	s.readOnly = false
	if err := s.fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create store %s: %w", dir, err)
	}
	desc, err := pebble.Peek(dir, s.fs)
	if err != nil {
		return nil, fmt.Errorf("create store %s: %w", dir, err)
	}
	if !desc.Exists {
		ls, err := s.fs.List(dir)
		if err != nil {
			return nil, fmt.Errorf("create store %s: %w", dir, err)
		}
		if len(ls) > 0 {
			return nil, fmt.Errorf("create store %s: directory is not empty and holds no store", dir)
		}
	}
	db, lock, g, err := openWritable(dir, s, false)
	if err != nil {
		if ns := (*noSpaceError)(nil); errors.As(err, &ns) {
			if ns.reserve && !desc.Exists {
				// No room for the reserve, and Pebble was not opened: leave
				// the directory as empty as it was, so that init can be run
				// again once there is room.
				_ = s.fs.Remove(s.fs.PathJoin(dir, "LOCK"))
			}
			return nil, err
		}
		return nil, fmt.Errorf("create store %s: %w", dir, err)
	}
	fail := func(err error) (*Store, error) {
		db.Close()
		lock.Close()
		return nil, fmt.Errorf("create store %s: %w", dir, g.check(err))
	}
	if v, closer, err := dbGet(db, configKey()); err == nil {
		_ = v
		closer.Close()
		return fail(ErrExists)
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return fail(fmt.Errorf("reading config: %w", err))
	}
	cfg := configRecord{Format: formatName, Version: formatVersion, Hash: uint16(s.hash)}
	if err := db.Set(configKey(), encodeConfig(cfg), pebble.Sync); err != nil {
		return fail(fmt.Errorf("writing config: %w", err))
	}
	return start(db, dir, s, lock, g)
}

// Open opens the store in dir. It fails with an error wrapping ErrNoStore
// when dir holds no initialized store.
//
// For writing (the default), Open takes the store's lock (ErrLocked when
// another process holds it), makes sure its reserve is allocated
// (ErrNoSpace when it cannot be), and deletes blobs staged by puts that
// never committed (a crash mid-put) before it returns. With
// Options.ReadOnly it writes nothing and takes no lock (SPECS.md §6.6).
func Open(dir string, opts *Options) (*Store, error) {
	s, err := resolve(opts)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	if s.readOnly {
		if desc, err := pebble.Peek(dir, s.fs); err == nil && desc.Exists {
			if err := s.checkMetadata(desc, dir); err != nil {
				return nil, err
			}
		}
		db, _, err := openReadOnly(dir, s)
		if err != nil {
			return nil, err
		}
		if err := readConfig(db, dir, &s); err != nil {
			db.Close()
			return nil, err
		}
		return start(db, dir, s, nil, nil)
	}
	desc, err := pebble.Peek(dir, s.fs)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("open store %s: %w", dir, ErrNoStore)
		}
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	if !desc.Exists {
		if hasPacks(s.fs, dir) {
			// Pebble's files are gone but the packs are there: rebuild.
			return openHealed(dir, s, opts, fmt.Errorf("open store %s: Pebble's files are gone, the packs are not: %w", dir, asl.ErrIntegrity))
		}
		return nil, fmt.Errorf("open store %s: %w", dir, ErrNoStore)
	}
	st, err := openExisting(dir, s, desc)
	if err != nil && healable(s.fs, dir, err) {
		return openHealed(dir, s, opts, err)
	}
	return st, err
}

// openHealed rebuilds the index of the store in dir from its packs after
// cause (damage to Pebble's files) and opens it (heal.go).
func openHealed(dir string, s settings, opts *Options, cause error) (*Store, error) {
	start := time.Now()
	rep, err := rebuildIndex(dir, s, cause)
	if err != nil {
		return nil, fmt.Errorf("%w; rebuilding the index from the packs failed: %v", cause, err)
	}
	s.hash = rep.Hash
	desc, err := pebble.Peek(dir, s.fs)
	if err != nil {
		return nil, fmt.Errorf("open store %s after rebuilding its index: %w", dir, err)
	}
	st, err := openExisting(dir, s, desc)
	if err != nil {
		return nil, fmt.Errorf("open store %s after rebuilding its index: %w", dir, err)
	}
	rep.Artifacts, rep.Damaged, rep.Duration = st.packRecovered, st.packDamaged, time.Since(start)
	st.rebuilt = &rep
	if opts != nil && opts.OnRebuild != nil {
		opts.OnRebuild(rep)
	}
	return st, nil
}

// Rebuilt reports whether this Open rebuilt the index from the packs
// because Pebble's files were damaged, and what it did.
func (s *Store) Rebuilt() (RebuildReport, bool) {
	if s.rebuilt == nil {
		return RebuildReport{}, false
	}
	return *s.rebuilt, true
}

// openExisting opens for writing the store in dir, which holds a Pebble
// database (desc).
func openExisting(dir string, s settings, desc *pebble.DBDesc) (*Store, error) {
	if err := s.checkMetadata(desc, dir); err != nil {
		return nil, err
	}
	db, lock, g, err := openWritable(dir, s, true)
	if err != nil {
		return nil, openErr(dir, err)
	}
	if err := readConfig(db, dir, &s); err != nil {
		db.Close()
		lock.Close()
		return nil, g.check(err)
	}
	st, err := start(db, dir, s, lock, g)
	if err != nil {
		return nil, err
	}
	if err := g.err(); err != nil {
		// Pebble spent the reserve to finish what it replayed: the file
		// system is full, and a writer should not go on.
		st.Close()
		return nil, err
	}
	return st, nil
}

// checkMetadata runs the damage checks of Pebble's own metadata before
// Pebble reads it (SPECS.md §6.4, Damage), and records whether Open must
// rebuild the index from every pack.
func (s *settings) checkMetadata(desc *pebble.DBDesc, dir string) error {
	po := pebbleOptions(*s)
	po.ErrorIfNotExists = true
	full, err := checkMetadata(s.fs, desc, dir, po)
	if err != nil {
		return fmt.Errorf("open store %s: %w", dir, err)
	}
	s.fullRescan = full
	return nil
}

// openErr prefixes err with the store, unless it names the store already
// (an out-of-space error).
func openErr(dir string, err error) error {
	if errors.As(err, new(*noSpaceError)) {
		return err
	}
	return fmt.Errorf("open store %s: %w", dir, err)
}

// openWritable locks dir, makes sure the reserve is there and opens Pebble
// on the guarded file system (SPECS.md §6.6).
func openWritable(dir string, s settings, mustExist bool) (*pebble.DB, *pebble.Lock, *spaceGuard, error) {
	lock, err := pebble.LockDirectory(dir, s.fs)
	if err != nil {
		if locked(err) {
			return nil, nil, nil, fmt.Errorf("%w; to use it from several processes at once, run `amduat serve --store %s` and point commands at --store http://127.0.0.1:8080", ErrLocked, dir)
		}
		if errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) {
			return nil, nil, nil, fmt.Errorf("cannot open it for writing (a read-only open works): %w", err)
		}
		return nil, nil, nil, fmt.Errorf("locking: %w", err)
	}
	g := newSpaceGuard(s.fs, dir, s.reserve)
	if err := g.ensureReserve(); err != nil {
		lock.Close()
		return nil, nil, nil, err
	}
	po := pebbleOptions(s)
	po.FS = &guardFS{FS: s.fs, g: g}
	po.Lock = lock
	po.ErrorIfNotExists = mustExist
	db, err := g.openWatched(dir, po)
	if err != nil {
		// Pebble dropped its reference to the lock when its Open failed;
		// an abandoned Open (out of space) drops it if it ever returns.
		lock.Close()
		return nil, nil, nil, g.check(pebbleOpenErr(err))
	}
	return db, lock, g, nil
}

// readConfig reads and checks the config record and sets s.hash. A store
// of an older version opened for writing is upgraded to formatVersion
// (synced): once this build may have written records an older reader does
// not know (pack records, parts, commit markers), that reader must refuse
// the store. A read-only open reads it as it is.
func readConfig(db *pebble.DB, dir string, s *settings) error {
	v, closer, err := dbGet(db, configKey())
	if err != nil {
		if errors.Is(err, pebble.ErrNotFound) {
			if hasPacks(s.fs, dir) {
				// Pebble lost its first records, not a store that was
				// never created: packs are written only after the config.
				return fmt.Errorf("open store %s: no config record, but pack files: %w", dir, asl.ErrIntegrity)
			}
			return fmt.Errorf("open store %s: no config record: %w", dir, ErrNoStore)
		}
		return fmt.Errorf("open store %s: reading config: %w", dir, ioErr(err))
	}
	cfg, err := decodeConfig(v)
	closer.Close()
	if err != nil {
		return fmt.Errorf("open store %s: %w", dir, err)
	}
	s.hash = asl.HashID(cfg.Hash)
	if cfg.Version < formatVersion && !s.readOnly {
		// Version 1 stores have no pack records, version 2 ones no parts
		// of large artifacts in packs, version 3 ones no commit markers;
		// once this build may have written them, an older reader must
		// refuse the store.
		cfg.Version = formatVersion
		if err := db.Set(configKey(), encodeConfig(cfg), pebble.Sync); err != nil {
			return fmt.Errorf("open store %s: upgrading config to version %d: %w", dir, formatVersion, ioErr(err))
		}
	}
	return nil
}

func start(db *pebble.DB, dir string, s settings, lock *pebble.Lock, g *spaceGuard) (*Store, error) {
	st := &Store{
		db:          db,
		dir:         dir,
		hash:        s.hash,
		chunkSize:   s.chunkSize,
		inlineMax:   s.inlineMax,
		minCompress: s.minCompress,
		drained:     make(chan struct{}, 1),
		stageBytes:  stageBatchBytes,
		ingestMin:   s.ingestMin,
		packMin:     s.packMin,
		fs:          s.fs,
		readOnly:    s.readOnly,
		lock:        lock,
		space:       g,
		fullRescan:  s.fullRescan,
	}
	fail := func(err error) (*Store, error) {
		if st.packs != nil {
			st.packs.close()
		}
		if st.roIndex != nil {
			st.roIndex.Close()
		}
		_ = st.closeMeta()
		db.Close()
		if lock != nil {
			lock.Close()
		}
		return nil, openErr(dir, g.check(err))
	}
	if !s.readOnly {
		po := pebbleOptions(s)
		po.EnsureDefaults()
		st.sstOpts = po.MakeWriterOptions(0, db.TableFormat())
		if err := st.clearIngestDir(); err != nil {
			return fail(err)
		}
	}
	var err error
	if st.packs, err = openPacks(s.fs, dir, s.readOnly); err != nil {
		return fail(err)
	}
	// The journal first: its tombstones keep deleted copies deleted.
	if err := st.openMeta(); err != nil {
		return fail(err)
	}
	pending, err := st.recoverPacks(s.fullRescan)
	if err != nil {
		return fail(err)
	}
	for i := range st.claims {
		st.claims[i].m = make(map[asl.Reference]*claim)
	}
	if s.readOnly {
		// Nothing is written: pack records found above their watermarks
		// are served from memory (getIndex looks in pending first).
		st.idx = &indexQueue{pending: pending}
		return st, nil
	}
	if err := st.recover(); err != nil {
		return fail(err)
	}
	st.startIndexQueue()
	return st, nil
}

// recover deletes staged blobs left by puts that never committed and sets
// the next blob id above every id in use.
func (s *Store) recover() error {
	next := uint64(1)
	v, closer, err := dbGet(s.db, counterKey())
	switch {
	case err == nil:
		n, derr := decodeCounter(v)
		closer.Close()
		if derr != nil {
			return derr
		}
		next = max(next, n)
	case !errors.Is(err, pebble.ErrNotFound):
		return ioErr(err)
	}
	// The counter is written before any chunk under the ids it covers, but
	// take the highest chunk key too so that a damaged counter can never
	// hand out a live id.
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixChunk}, UpperBound: []byte{prefixChunk + 1}})
	if err != nil {
		return ioErr(err)
	}
	if it.Last() && len(it.Key()) == 17 {
		next = max(next, beUint64(it.Key()[1:9])+1)
	}
	if err := it.Close(); err != nil {
		return ioErr(err)
	}

	it, err = s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixStaging}, UpperBound: []byte{prefixStaging + 1}})
	if err != nil {
		return ioErr(err)
	}
	b := s.db.NewBatch()
	defer b.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) == 9 {
			blob := beUint64(k[1:])
			b.DeleteRange(appendChunkKey(nil, blob, 0), appendChunkKey(nil, blob+1, 0), nil)
			next = max(next, blob+1)
			s.recovered++
		}
		b.Delete(k, nil)
	}
	if err := it.Close(); err != nil {
		return ioErr(err)
	}
	s.nextBlob, s.leaseEnd = next, next
	if b.Empty() {
		return nil
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("deleting staged blobs: %w", ioErr(err))
	}
	return nil
}

func beUint64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
		uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
}

// allocBlob returns a fresh blob id. Ids are leased blobLease at a time: the
// lease end is committed (synced, under blobMu, so leases persist in order)
// before any id of the lease is used.
func (s *Store) allocBlob() (uint64, error) {
	s.blobMu.Lock()
	defer s.blobMu.Unlock()
	if s.nextBlob == s.leaseEnd {
		end := s.leaseEnd + blobLease
		if err := s.db.Set(counterKey(), appendCBOR(nil, end), pebble.Sync); err != nil {
			return 0, fmt.Errorf("persisting blob counter: %w", ioErr(err))
		}
		s.commits.Add(1)
		s.leaseEnd = end
	}
	id := s.nextBlob
	s.nextBlob++
	return id, nil
}

// acquire registers an operation; Close waits for registered operations.
func (s *Store) acquire() error {
	if s.state.Add(1)&closedBit != 0 {
		s.release()
		return ErrClosed
	}
	return nil
}

func (s *Store) release() {
	if s.state.Add(-1) == closedBit {
		select {
		case s.drained <- struct{}{}:
		default:
		}
	}
}

// Close waits for operations in flight (not for open readers, whose later
// reads fail with ErrClosed) and closes the database. Calling Close from an
// Enumerate callback deadlocks.
func (s *Store) Close() error {
	old := s.state.Or(closedBit)
	if old&closedBit != 0 {
		return nil
	}
	if old != 0 {
		<-s.drained
	}
	var err error
	if !s.readOnly {
		err = s.idx.stop()
		// Index records committed without a sync: make them durable so the
		// next Open has nothing to rebuild.
		if lerr := s.syncLog(); err == nil {
			err = lerr
		}
	}
	if s.roIndex != nil {
		_ = s.roIndex.Close()
	}
	if merr := s.closeMeta(); err == nil {
		err = merr
	}
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	if s.lock != nil {
		if lerr := s.lock.Close(); err == nil {
			err = lerr
		}
	}
	if perr := s.packs.close(); err == nil {
		err = perr
	}
	if err != nil {
		return fmt.Errorf("close store %s: %w", s.dir, s.space.check(err))
	}
	return nil
}

// Sync waits until the queued index commits of packed batches are applied
// and makes every index record durable (one synced log write, when some
// commit relied on a pack's sync). Puts are durable when they return
// without it; after Sync a crash leaves Open nothing to rebuild from the
// packs (SPECS.md §6.4). On a read-only store it does nothing.
func (s *Store) Sync() error {
	if err := s.acquire(); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	defer s.release()
	if s.readOnly {
		return nil
	}
	if err := s.idx.drain(); err != nil {
		return fmt.Errorf("sync: %w", s.space.check(err))
	}
	if err := s.syncLog(); err != nil {
		return fmt.Errorf("sync: %w", s.space.check(err))
	}
	return nil
}

// acquireWrite registers a write: refused on a read-only store
// (ErrReadOnly) and on a store that ran out of space (ErrNoSpace).
func (s *Store) acquireWrite() error {
	if s.readOnly {
		return fmt.Errorf("store %s: %w", s.dir, ErrReadOnly)
	}
	if err := s.space.err(); err != nil {
		return err
	}
	return s.acquire()
}

// ReadOnly reports whether the store was opened with Options.ReadOnly.
func (s *Store) ReadOnly() bool { return s.readOnly }

// syncLog makes Pebble's log durable (one synced empty write) if a commit
// relied on a pack's sync since the last time.
func (s *Store) syncLog() error {
	if !s.unsynced.Swap(false) {
		return nil
	}
	if err := s.db.LogData(nil, pebble.Sync); err != nil {
		s.unsynced.Store(true)
		return ioErr(err)
	}
	return nil
}

// DefaultHash is the hash recorded at Create.
func (s *Store) DefaultHash() asl.HashID { return s.hash }

// Dir is the directory the store lives in.
func (s *Store) Dir() string { return s.dir }

func (s *Store) getBuf() *[]byte {
	if b, ok := s.bufs.Get().(*[]byte); ok {
		return b
	}
	// Spare capacity past the chunk lets zstd decode a chunk's last block
	// with its fast copies (decompress); users slice by length.
	b := make([]byte, s.chunkSize, s.chunkSize+decodeSlack)
	return &b
}

func (s *Store) putBuf(b *[]byte) { s.bufs.Put(b) }

var _ io.Closer = (*Store)(nil)
