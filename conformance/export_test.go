package conformance

import (
	"os"
	"sync"
)

// FrozenVectors is Load of the checked-in vector files (../vectors), done
// once for every test of the package that reads the vectors without
// running them (coverage, independent recomputation, altered
// expectations): parsing the 5 MiB of JSON costs about a CPU-second under
// -race, which each such test paid again. TestVectors still loads and runs
// the files itself, through RunDir. Callers must not modify what it
// returns.
var FrozenVectors = sync.OnceValues(func() ([]Loaded, error) {
	return Load(os.DirFS("../vectors"))
})
