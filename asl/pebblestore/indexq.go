package pebblestore

import (
	"fmt"
	"sync"

	"github.com/amduat/amduat/asl"
	"github.com/cockroachdb/pebble/v2"
)

// indexQueueDepth bounds the packed batches whose index records are
// waiting for their commit: a put blocks while this many are queued.
const indexQueueDepth = 4

// indexQueue commits the index records of packed batches, in pack order,
// on one goroutine (SPECS.md §6.4, "Pack files"). A packed batch is durable
// once its pack is synced; its index records need no sync of their own, so
// the put returns as soon as they are queued, and the memtable insert
// overlaps the caller's next batch. Until a record's commit is applied it
// is served from pending: every read of the index consults pending first,
// and walks of the index (Enumerate) wait for the queue to drain.
//
// Jobs are queued while the pack lock is held, so commits follow the order
// of the appends, as the watermark rule requires. A failed commit is
// sticky: the records stay in pending (their bytes are in a synced pack,
// and the next Open indexes them again from it) and every later write fails
// with the error.
type indexQueue struct {
	mu      sync.RWMutex
	pending map[asl.Reference]pendingRecord
	err     error // the first failed commit; guarded by mu

	jobs   chan *indexJob
	done   chan struct{}         // closed when the committer has stopped
	commit func(*indexJob) error // (*Store).commitIndexJob; tests replace it
}

type pendingRecord struct {
	val []byte // the encoded index record
	job *indexJob
}

// indexJob is the index commit of one packed batch, or, when call is set,
// a call the committer makes once every job queued before it is done.
type indexJob struct {
	refs []asl.Reference
	vals [][]byte
	pack uint64
	end  uint64 // the pack's watermark after the batch
	call func()
}

func (s *Store) startIndexQueue() {
	q := &indexQueue{pending: map[asl.Reference]pendingRecord{}, jobs: make(chan *indexJob, indexQueueDepth), done: make(chan struct{}), commit: s.commitIndexJob}
	s.idx = q
	go func() {
		defer close(q.done)
		for job := range q.jobs {
			if job.call != nil {
				job.call()
				continue
			}
			err := q.commit(job)
			q.mu.Lock()
			if err != nil {
				if q.err == nil {
					q.err = fmt.Errorf("committing the index records of pack %d up to %d: %w", job.pack, job.end, err)
				}
			} else {
				for _, ref := range job.refs {
					if p, ok := q.pending[ref]; ok && p.job == job {
						delete(q.pending, ref)
					}
				}
			}
			q.mu.Unlock()
		}
	}()
}

// commitIndexJob commits job's index records and its pack watermark in one
// unsynced batch, in key order (each memtable insert starts from the
// previous one's position).
func (s *Store) commitIndexJob(job *indexJob) error {
	key, order := indexKeys(len(job.refs), func(j int) asl.Reference { return job.refs[j] })
	b := s.db.NewBatch()
	defer b.Close()
	for _, j := range order {
		_ = b.Set(key(j), job.vals[j], nil)
	}
	var vb [16]byte
	_ = b.Set(watermarkKey(job.pack), appendCBOR(vb[:0], job.end), nil)
	if err := b.Commit(pebble.NoSync); err != nil {
		return ioErr(err)
	}
	s.unsynced.Store(true)
	s.commits.Add(1)
	return nil
}

// enqueue makes job's records visible through pending and queues their
// commit. The caller holds the pack lock.
func (q *indexQueue) enqueue(job *indexJob) error {
	q.mu.Lock()
	if q.err != nil {
		err := q.err
		q.mu.Unlock()
		return err
	}
	for j, ref := range job.refs {
		q.pending[ref] = pendingRecord{val: job.vals[j], job: job}
	}
	q.mu.Unlock()
	q.jobs <- job
	return nil
}

// lookup returns the pending index record of ref, if any. The bytes are
// never modified.
func (q *indexQueue) lookup(ref asl.Reference) ([]byte, bool) {
	q.mu.RLock()
	p, ok := q.pending[ref]
	q.mu.RUnlock()
	return p.val, ok
}

// failed returns the sticky error of a failed commit.
func (q *indexQueue) failed() error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return q.err
}

// drain waits until every job queued before the call is committed (or has
// failed), and returns the sticky error.
func (q *indexQueue) drain() error {
	if q.jobs == nil { // a read-only store's: nothing is ever queued
		return q.failed()
	}
	ch := make(chan struct{})
	q.jobs <- &indexJob{call: func() { close(ch) }}
	<-ch
	return q.failed()
}

// stop drains the queue and stops the committer; no job may be queued
// after it.
func (q *indexQueue) stop() error {
	if q.jobs == nil {
		return q.failed()
	}
	close(q.jobs)
	<-q.done
	return q.failed()
}
