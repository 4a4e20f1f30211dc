package pel

// SpecStats are a speculator's counts (SPECS.md §12.10).
type SpecStats = specStats

// SetSpecMinHashBytes sets the input size from which hash nodes are
// speculated; the returned function restores it.
func SetSpecMinHashBytes(n uint64) (restore func()) {
	old := specMinHashBytes
	specMinHashBytes = n
	return func() { specMinHashBytes = old }
}

// SetSpecTestHook makes every parallel run report its counts to f when it
// ends; the returned function removes the hook. Tests using it must not
// run in parallel with other parallel runs.
func SetSpecTestHook(f func(SpecStats)) (restore func()) {
	specTestHook = f
	return func() { specTestHook = nil }
}
