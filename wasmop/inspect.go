package wasmop

import (
	"context"
	"fmt"
	"sync"

	"github.com/tetratelabs/wazero"
)

// ModuleInfo describes a module as the operation sees it.
type ModuleInfo struct {
	Imports []Import
	Exports []Export
	// HasMemory reports a memory (defined; an imported one is rejected).
	HasMemory      bool
	MemoryMinPages uint32
	// MemoryMaxPages is the declared maximum, valid when HasMemoryMax.
	MemoryMaxPages uint32
	HasMemoryMax   bool
	// HasInitialize reports an _initialize export (called before the entry).
	HasInitialize bool
	// NaNSites counts the float instructions the pass canonicalises.
	NaNSites int
}

// ModuleError is a module's rejection: the status code and diagnostic the
// operation reports for it, and for people a detail of the cause.
type ModuleError struct {
	StatusCode uint32
	Message    string
	Detail     error
}

func (e *ModuleError) Error() string {
	if e.Detail != nil {
		return fmt.Sprintf("%s (status code 0x%08x): %v", e.Message, e.StatusCode, e.Detail)
	}
	return fmt.Sprintf("%s (status code 0x%08x)", e.Message, e.StatusCode)
}

func (e *ModuleError) Unwrap() error { return e.Detail }

var (
	inspectOnce sync.Once
	inspectRT   wazero.Runtime
)

// Inspect validates module as the operation does before it runs it (with
// the largest memory limit and no entry: SPECS.md §20.3 steps 1 to 5) and
// describes it. A rejection is a *ModuleError.
func Inspect(module []byte) (ModuleInfo, error) {
	d, err := decodeModule(module, MaxMemoryPages)
	if err != nil {
		return ModuleInfo{}, &ModuleError{StatusCode: StatusInvalidModule, Message: msgInvalidModule, Detail: err}
	}
	inspectOnce.Do(func() {
		inspectRT = wazero.NewRuntimeWithConfig(context.Background(),
			wazero.NewRuntimeConfigInterpreter().WithCoreFeatures(Features).WithCustomSections(false))
	})
	cm, err := inspectRT.CompileModule(context.Background(), d.rewritten)
	if err != nil {
		return ModuleInfo{}, &ModuleError{StatusCode: StatusInvalidModule, Message: msgInvalidModule, Detail: err}
	}
	cm.Close(context.Background())
	// check with an export that always exists: entry checks do not apply.
	if f := d.checkModule(MaxMemoryPages); f != nil {
		return ModuleInfo{}, &ModuleError{StatusCode: f.code, Message: f.msg}
	}
	return ModuleInfo{
		Imports: d.imports, Exports: d.exports,
		HasMemory: d.hasMemory, MemoryMinPages: d.memMin, MemoryMaxPages: d.memMax, HasMemoryMax: d.hasMemMax,
		HasInitialize: d.hasInitialize(), NaNSites: d.nanSites,
	}, nil
}
