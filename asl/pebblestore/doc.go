// Package pebblestore is the embedded default asl.Store: one directory, a
// Pebble (github.com/cockroachdb/pebble/v2) database plus pack files, no
// server. It has the
// store semantics of SPECS.md §6 (§6.1 put, §6.2 get and verification, §6.3
// errors); its on-disk layout is project-internal and described,
// informatively, in SPECS.md §6.4.
//
// Invariants:
//
//   - Put is idempotent: an artifact already stored is not written again, also
//     under concurrent puts of the same artifact. Put and PutBatch are durable
//     when they return nil: one sync per Put or PutBatch (a synced Pebble
//     batch, or for a packed batch the pack's sync), never one per artifact.
//   - Every read verifies: an artifact of up to one chunk is checked against
//     its digest before any byte is returned; a chunked artifact has each
//     chunk checked by CRC-32C before its bytes are returned, and its last
//     chunk is withheld until the digest of the whole payload matches. Damage
//     (payload, record, missing chunk) yields an error wrapping
//     asl.ErrIntegrity, never wrong bytes. A missing artifact is
//     asl.ErrNotFound, an unregistered hash id asl.ErrUnsupported; any other
//     error is an I/O error.
//   - Artifacts larger than one chunk (default 256 KiB) stream through Put and
//     Fetch with a few chunk buffers of memory, whatever their size.
//   - A put that never committed (a crash mid-stream) is never visible: its
//     chunks sit under a staging record and are deleted by the next Open.
//   - Artifacts of at least Options.IngestMin bytes (default 16 MiB) bypass
//     Pebble's write-ahead log: their chunks are written into SSTables that
//     are ingested, so each byte reaches the disk once. Their staging record
//     is durable before the ingest; Open removes tables never ingested.
//   - Artifacts of up to one chunk in a Put or PutBatch of at least
//     Options.PackMin payload bytes (default 64 KiB) are appended to an
//     append-only pack file under packs/, synced before their index records
//     are committed: each payload byte reaches the disk once, and Pebble
//     holds only small index records. Those commits need no sync of their
//     own: every pack record carries its reference, and Open rebuilds the
//     index records above each pack's watermark from verified records.
//     A batch of new artifacts returns once its pack is synced: its index
//     commit is queued for one committer goroutine, and reads find its
//     records in an in-memory pending set meanwhile.
//     Packs are read through a read-only shared mapping where the file
//     system has file descriptors (a read is a copy, not a system call); a
//     pack shrunk behind the store's back gives ErrIntegrity, not a crash.
//   - Chunks are compressed with zstd only where it pays (at least 4 KiB and
//     a saving of at least one eighth); the choice is recorded per chunk.
//   - One writer at a time holds the store's lock; a second one gets
//     ErrLocked. Options.ReadOnly opens create, change, sync and lock
//     nothing, work beside readers and a writer, and see a snapshot as of
//     their open (commits only in Pebble's log and unindexed pack records
//     included); writes on them are ErrReadOnly (SPECS.md §6.6).
//   - Running out of space is ErrNoSpace, never a hang: Pebble writes
//     through a file system that frees the store's reserve file on the
//     first ENOSPC, so Pebble can finish what it started, and the store
//     refuses writes from then on; an Open that waits for a flush Pebble
//     cannot finish gives up at once (SPECS.md §6.6).
//   - Store-internal records are deterministic CBOR (RFC 8949 core
//     deterministic encoding), decoded strictly; they never replace a
//     normative encoding.
package pebblestore
