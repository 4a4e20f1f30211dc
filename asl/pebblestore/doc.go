// Package pebblestore is the embedded default asl.Store: one directory, a
// Pebble (github.com/cockroachdb/pebble/v2) database plus pack files, no
// server. It has the
// store semantics of SPECS.md §6 (§6.1 put, §6.2 get and verification, §6.3
// errors); its on-disk layout is project-internal and described,
// informatively, in SPECS.md §6.4.
//
// Invariants:
//
//   - Every acknowledged artifact lies, with its reference, in a pack file
//     (packs/) synced before Put or PutBatch returns: one sync per Put or
//     PutBatch, never one per artifact. An artifact of up to one chunk is
//     one record; a larger one is its chunks as parts, completed by a large
//     record once its reference is known. Pebble holds only the index over
//     the packs (and index entries): its commits need no sync of their own,
//     and a batch of new artifacts returns once its pack is synced, its
//     index commit queued for one committer goroutine (reads find its
//     records in an in-memory pending set meanwhile). Open rebuilds from the
//     packs the index records Pebble lost, above each pack's watermark, or
//     from every pack record when Pebble may have lost older ones (SPECS.md
//     §6.4, "Pack files", "Damage").
//   - Put is idempotent: an artifact already stored is not written again, also
//     under concurrent puts of the same artifact.
//   - Every read verifies: an artifact of up to one chunk is checked against
//     its digest before any byte is returned; a chunked artifact has each
//     chunk checked by CRC-32C before its bytes are returned, and its last
//     chunk is withheld until the digest of the whole payload matches. Damage
//     (payload, record, missing chunk, and whatever Pebble's own checksums
//     or the checks of its MANIFEST and OPTIONS files find) yields an error
//     wrapping asl.ErrIntegrity, never wrong bytes. A missing artifact is
//     asl.ErrNotFound, an unregistered hash id asl.ErrUnsupported; any other
//     error is an I/O error.
//   - Damage does not stop Enumerate: it skips what it cannot read and names
//     it at the end. Salvage copies what still reads and verifies from a
//     store that no longer opens into a new one.
//   - Artifacts larger than one chunk (default 256 KiB) stream through Put and
//     Fetch with a few chunk buffers of memory, whatever their size.
//   - A put that never committed (a crash mid-stream) is never visible: its
//     parts have no large record, and only an index record (or, on
//     recovery, a verified large record) makes an artifact visible.
//   - Packs are read through a read-only shared mapping where the file
//     system has file descriptors (a small read is a copy, not a system
//     call; the parts of large artifacts are read with pread); a pack
//     shrunk behind the store's back gives ErrIntegrity, not a crash.
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
//   - Deletion (Delete, GC) removes index records and leaves a tombstone
//     naming the deleted copy's pack position, so no recovery or rescan
//     brings it back. A re-put of a stored artifact checks the stored copy
//     and replaces a damaged one (Repair does it with a full verification).
//     GC deletes what the pins and its roots do not reach, keeps whatever
//     is put or read while it runs (a lock that puts and reads hold for
//     reading), and compacts packs: copy, sync, repoint, then remove the
//     file; a crash at any point loses nothing reachable (SPECS.md §6.4,
//     "Deletion", "Repair", "Garbage collection").
//   - Store metadata that nothing rebuilds (pins and their history, the
//     run log, the cache salt, tombstones) is appended as checksummed
//     records to meta.journal and synced before a change returns; Pebble
//     holds a copy, which Open brings up to date from the journal's
//     watermark on, and which rewrites a damaged journal (SPECS.md §6.4,
//     "Metadata journal"). GC waits for a PutThenPin, so nothing is
//     garbage between a put and its pin.
//   - Store-internal records are deterministic CBOR (RFC 8949 core
//     deterministic encoding), decoded strictly; they never replace a
//     normative encoding.
//   - The store still reads the layout of format versions 1 and 2 (payloads
//     inline in index records, or as chunks staged in Pebble or ingested as
//     SSTables), which Options.PackMin < 0 still writes, for tests and
//     measurements: those artifacts rest on Pebble's files.
package pebblestore
