package wasmop

// MmapSupported reports whether large linear memories are mapped lazily
// (so a test may grow one to 65,535 pages without holding 4 GiB).
const MmapSupported = mmapSupported

// SnapshotFuel returns the units of fuel the snapshot of module under
// maxPages records (what its _initialize used), and whether e holds such
// a snapshot.
func SnapshotFuel(e *Engine, module []byte, maxPages uint32) (uint64, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, ent := range e.entries {
		if k.pages == maxPages && sameBytes(ent.module, module) {
			if s := ent.snap.Load(); s != nil {
				return s.fuelUsed, true
			}
		}
	}
	return 0, false
}
