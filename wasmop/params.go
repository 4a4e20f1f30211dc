package wasmop

import (
	"fmt"
	"unicode/utf8"

	"github.com/amduat/amduat/enc"
	"github.com/amduat/amduat/opreg"
)

// Bounds of the params fields (SPECS.md §20.2).
const (
	MaxExportLen   = 255
	MaxOutputs     = 1024
	MaxMemoryPages = 65536
)

// Params is the params value of amduat.wasm.run v1 (SPECS.md §20.2).
type Params struct {
	// Export names the entry function, of type () -> i32.
	Export string
	// Outputs is the number of output artifacts (0..MaxOutputs).
	Outputs uint32
	// MaxMemoryPages bounds the module's linear memory, in 64 KiB pages
	// (1..MaxMemoryPages).
	MaxMemoryPages uint32
	// MaxOutputBytes bounds the total payload of all outputs of one call.
	MaxOutputBytes uint64
	// MaxFuel is the call's deterministic work bound, in units of fuel
	// (SPECS.md §20.5): 0 means DefaultFuel.
	MaxFuel uint64
}

// DefaultFuel is the work bound of a call whose params give max_fuel 0:
// 2^32 units (function entries and loop iterations).
const DefaultFuel uint64 = 1 << 32

// Fuel is the effective work bound of p.
func (p Params) Fuel() uint64 {
	if p.MaxFuel == 0 {
		return DefaultFuel
	}
	return p.MaxFuel
}

func (p Params) check() error {
	switch {
	case len(p.Export) == 0 || len(p.Export) > MaxExportLen:
		return fmt.Errorf("export name is %d bytes, want 1 to %d", len(p.Export), MaxExportLen)
	case !utf8.ValidString(p.Export):
		return fmt.Errorf("export name is not valid UTF-8")
	case p.Outputs > MaxOutputs:
		return fmt.Errorf("outputs %d exceeds the maximum %d", p.Outputs, MaxOutputs)
	case p.MaxMemoryPages < 1 || p.MaxMemoryPages > MaxMemoryPages:
		return fmt.Errorf("max_memory_pages %d is outside 1..%d", p.MaxMemoryPages, MaxMemoryPages)
	}
	return nil
}

// EncodeParams returns the canonical ParamsBytes of p:
// export_len u16 || export || outputs u32 || max_memory_pages u32 ||
// max_output_bytes u64 || max_fuel u64, big-endian.
func EncodeParams(p Params) ([]byte, error) {
	if err := p.check(); err != nil {
		return nil, fmt.Errorf("%s params: %w: %v", Name, opreg.ErrParams, err)
	}
	w := enc.Writer{Buf: make([]byte, 0, 26+len(p.Export))}
	w.U16(uint16(len(p.Export)))
	w.Raw([]byte(p.Export))
	w.U32(p.Outputs)
	w.U32(p.MaxMemoryPages)
	w.U64(p.MaxOutputBytes)
	w.U64(p.MaxFuel)
	return w.Buf, nil
}

// DecodeParams parses ParamsBytes strictly (SPECS.md §20.2).
func DecodeParams(b []byte) (Params, error) {
	r := enc.NewReader(b)
	var p Params
	off := r.Offset()
	n := r.U16("export length")
	switch {
	case r.Err() != nil:
	case n == 0 || n > MaxExportLen:
		r.FailAt(off, "export length", "%d is outside 1..%d", n, MaxExportLen)
	case int(n) > r.Remaining():
		r.FailAt(off, "export", "length %d exceeds the %d bytes remaining", n, r.Remaining())
	default:
		name := r.Raw(int(n), "export")
		if !utf8.Valid(name) {
			r.FailAt(off+2, "export", "not valid UTF-8")
		}
		p.Export = string(name)
	}
	off = r.Offset()
	if p.Outputs = r.U32("outputs"); r.Err() == nil && p.Outputs > MaxOutputs {
		r.FailAt(off, "outputs", "%d exceeds the maximum %d", p.Outputs, MaxOutputs)
	}
	off = r.Offset()
	if p.MaxMemoryPages = r.U32("max_memory_pages"); r.Err() == nil && (p.MaxMemoryPages < 1 || p.MaxMemoryPages > MaxMemoryPages) {
		r.FailAt(off, "max_memory_pages", "%d is outside 1..%d", p.MaxMemoryPages, MaxMemoryPages)
	}
	p.MaxOutputBytes = r.U64("max_output_bytes")
	p.MaxFuel = r.U64("max_fuel")
	if err := r.Done(); err != nil {
		return Params{}, fmt.Errorf("%s params: %w: %w", Name, opreg.ErrParams, err)
	}
	return p, nil
}

// paramsJSON is the readable form in the JSON program format (SPECS.md §15,
// §20.2). Every member is required but max_fuel (absent = 0, the
// default), which is written only when not 0.
type paramsJSON struct {
	Export         *string `json:"export"`
	Outputs        *uint32 `json:"outputs"`
	MaxMemoryPages *uint32 `json:"max_memory_pages"`
	MaxOutputBytes *uint64 `json:"max_output_bytes"`
	MaxFuel        *uint64 `json:"max_fuel,omitempty"`
}

// ParamsToJSON renders p (a Params) in the readable form.
func ParamsToJSON(v any) ([]byte, error) {
	p, ok := v.(Params)
	if !ok {
		return nil, fmt.Errorf("%s params: %w: want wasmop.Params, got %T", Name, opreg.ErrParams, v)
	}
	j := paramsJSON{Export: &p.Export, Outputs: &p.Outputs, MaxMemoryPages: &p.MaxMemoryPages, MaxOutputBytes: &p.MaxOutputBytes}
	if p.MaxFuel != 0 {
		j.MaxFuel = &p.MaxFuel
	}
	return opreg.MarshalJSONCompact(j)
}

// ParamsFromJSON parses the readable form strictly: unknown members,
// missing members and out-of-range values are rejected.
func ParamsFromJSON(raw []byte) (any, error) {
	fail := func(format string, args ...any) (any, error) {
		return nil, fmt.Errorf("%s params: %w: %s", Name, opreg.ErrParams, fmt.Sprintf(format, args...))
	}
	if raw == nil {
		return fail(`want {"export":...,"outputs":N,"max_memory_pages":N,"max_output_bytes":N[,"max_fuel":N]}`)
	}
	var j paramsJSON
	if err := opreg.StrictUnmarshal(raw, &j); err != nil {
		return fail("%v", err)
	}
	if j.Export == nil || j.Outputs == nil || j.MaxMemoryPages == nil || j.MaxOutputBytes == nil {
		return fail(`"export", "outputs", "max_memory_pages" and "max_output_bytes" are all required`)
	}
	p := Params{Export: *j.Export, Outputs: *j.Outputs, MaxMemoryPages: *j.MaxMemoryPages, MaxOutputBytes: *j.MaxOutputBytes}
	if j.MaxFuel != nil {
		p.MaxFuel = *j.MaxFuel
	}
	if err := p.check(); err != nil {
		return fail("%v", err)
	}
	return p, nil
}
