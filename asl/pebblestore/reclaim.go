package pebblestore

import (
	"context"
	"fmt"
	"time"
)

// ReclaimReport says what Reclaim gave back.
type ReclaimReport struct {
	PacksCompacted int           `json:"packs_compacted"`
	PacksDeleted   int           `json:"packs_deleted"`
	Rewritten      int64         `json:"rewritten"` // live artifacts copied out of compacted packs
	RewrittenBytes int64         `json:"rewritten_bytes"`
	PackBytes      [2]int64      `json:"pack_bytes"` // before, after
	Duration       time.Duration `json:"duration_ns"`
}

// reclaimRanges are the key spaces a deletion or the pruning after it
// writes to (SPECS.md §6.4, "Keys", "Deletion"): index records,
// tombstones, the chunks of the version 2 layout, pack watermarks and
// pack damage records (pruned with their packs).
var reclaimRanges = [][2]byte{
	{prefixDamage, prefixDamage + 1},
	{prefixTomb, prefixTomb + 1},
	{prefixIndex, prefixIndex + 1},
	{prefixChunk, prefixChunk + 1},
	{prefixPack, prefixPack + 1},
}

// Reclaim gives back the space of artifacts already deleted (by Delete,
// as `serve --max-size` evicts; SPECS.md §18.11) without a mark and
// sweep: the steps 5 to 7 of GC (SPECS.md §6.4, "Garbage collection").
// Packs whose live fraction is below below (0: DefaultCompactBelow) are
// rewritten and removed, the watermarks and tombstone positions of packs
// gone are pruned, and Pebble compacts only the key ranges a deletion
// writes to. Puts wait while it runs, as for GC, and reads go on; it runs
// after a collection or before one, never beside it. Crash safety is
// GC's: every step is synced before the next depends on it.
func (s *Store) Reclaim(ctx context.Context, below float64) (ReclaimReport, error) {
	start := time.Now()
	var rep ReclaimReport
	if below < 0 {
		return rep, fmt.Errorf("reclaim: live fraction %v below 0", below)
	}
	if below == 0 {
		below = DefaultCompactBelow
	}
	if err := s.acquireWrite(); err != nil {
		return rep, fmt.Errorf("reclaim: %w", err)
	}
	defer s.release()
	s.gcRun.Lock()
	defer s.gcRun.Unlock()
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	var err error
	if rep.PackBytes[0], err = s.packBytes(); err != nil {
		return rep, fmt.Errorf("reclaim: %w", err)
	}
	var g GCReport
	point := func(string) {}
	if err := s.compactPacks(ctx, below, compactBatchBytes, &g, point); err != nil {
		return rep, fmt.Errorf("reclaim: compacting packs: %w", err)
	}
	rep.PacksCompacted, rep.PacksDeleted = g.PacksCompacted, g.PacksDeleted
	rep.Rewritten, rep.RewrittenBytes = g.Rewritten, g.RewrittenBytes
	if err := s.pruneDead(point); err != nil {
		return rep, fmt.Errorf("reclaim: %w", err)
	}
	for _, r := range reclaimRanges {
		if err := s.db.Compact(ctx, []byte{r[0]}, []byte{r[1]}, false); err != nil {
			return rep, fmt.Errorf("reclaim: compacting the index range %q: %w", r[0], ioErr(err))
		}
	}
	if rep.PackBytes[1], err = s.packBytes(); err != nil {
		return rep, fmt.Errorf("reclaim: %w", err)
	}
	rep.Duration = time.Since(start)
	return rep, nil
}
