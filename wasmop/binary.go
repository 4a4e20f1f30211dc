package wasmop

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file holds the module pass of SPECS.md §20.5: a decoder of the
// WebAssembly 2.0 binary format that reads every section this project
// needs, walks every instruction of the code section (all opcodes and their
// immediates, including the 0xFC prefix) and rewrites the module:
//
//   - after every float instruction that may produce a NaN (nanOps) it
//     inserts a sequence that replaces any NaN by the positive canonical NaN;
//   - the memory's maximum becomes min(declared maximum, max_memory_pages,
//     MaxLinearPages) and a table's maximum min(declared maximum,
//     MaxTableElements / number of tables);
//   - every function defined in the module charges fuel at its entry and
//     at each loop iteration, and adds its frame cost to a stack counter
//     at its entry (trapping above MaxStackUnits) and takes it off when it
//     returns: its body is wrapped in a block and every return becomes a
//     branch to that block's end;
//   - the fuel and stack counters are exported, and so is every mutable
//     global (fuelExportSection), for the engine's snapshots (snapshot.go);
//   - custom sections are dropped (they have no meaning to execution).
//
// The pass rejects what it cannot read as WebAssembly 2.0 without SIMD and
// threads; everything else (typing, index ranges, constant expressions,
// element and data segments) is validated afterwards by the runtime on the
// rewritten bytes, which differ from the original only by the insertions.

// Module limits of the project (SPECS.md §20.5).
const (
	// MaxTableElements bounds a table's size (minimum and maximum).
	MaxTableElements = 1 << 20
	// MaxFunctionLocals bounds the locals one function declares.
	MaxFunctionLocals = 50000
	// MaxTables bounds the tables a module defines; the tables share
	// MaxTableElements: each one's maximum is at most MaxTableElements /
	// the number of tables.
	MaxTables = 64
	// MaxLinearPages is the largest linear memory, in 64 KiB pages: one page
	// below 4 GiB, whatever max_memory_pages says (SPECS.md §20.5). A
	// memory of exactly 4 GiB has a length that does not fit 32 bits, and
	// wazero's compiler then refuses every access while its interpreter
	// allows them: one request would have two results.
	MaxLinearPages = 65535
	// MaxStackUnits bounds the stack units of the calls in progress
	// (SPECS.md §20.5): each call of a function defined in the module
	// costs FrameUnits plus its parameters and declared locals.
	MaxStackUnits = 96000
	// FrameUnits is the fixed part of a call's stack units.
	FrameUnits = 64
)

// errMalformed is wrapped by every failure of the decoder: the module is not
// WebAssembly 2.0 without SIMD and threads, as far as the pass reads it.
var errMalformed = errors.New("malformed module")

// Value types of the binary format.
const (
	typeI32       = 0x7F
	typeI64       = 0x7E
	typeF32       = 0x7D
	typeF64       = 0x7C
	typeV128      = 0x7B
	typeFuncref   = 0x70
	typeExternref = 0x6F
)

// ValueTypeName is the text-format name of a value type byte.
func ValueTypeName(t byte) string {
	switch t {
	case typeI32:
		return "i32"
	case typeI64:
		return "i64"
	case typeF32:
		return "f32"
	case typeF64:
		return "f64"
	case typeFuncref:
		return "funcref"
	case typeExternref:
		return "externref"
	}
	return fmt.Sprintf("0x%02x", t)
}

// FuncType is a function type: its parameter and result value types.
type FuncType struct {
	Params  []byte
	Results []byte
}

func (t FuncType) String() string {
	s := "("
	for i, p := range t.Params {
		if i > 0 {
			s += ", "
		}
		s += ValueTypeName(p)
	}
	s += ") -> ("
	for i, r := range t.Results {
		if i > 0 {
			s += ", "
		}
		s += ValueTypeName(r)
	}
	return s + ")"
}

func (t FuncType) equal(u FuncType) bool {
	return string(t.Params) == string(u.Params) && string(t.Results) == string(u.Results)
}

// External kinds.
const (
	KindFunc   = "func"
	KindTable  = "table"
	KindMemory = "memory"
	KindGlobal = "global"
)

var kindNames = [...]string{KindFunc, KindTable, KindMemory, KindGlobal}

// Import is one import of a module. Type is set for function imports.
type Import struct {
	Module string
	Name   string
	Kind   string
	Type   FuncType
}

// Export is one export of a module. Type is set for function exports.
type Export struct {
	Name string
	Kind string
	Type FuncType
}

// decoded is what the pass learns about a module.
type decoded struct {
	imports   []Import
	exports   []Export
	types     []FuncType
	hasMemory bool
	memMin    uint32
	memMax    uint32 // valid when hasMemMax
	hasMemMax bool
	tableMin  uint64   // largest table minimum
	tableMins []uint32 // minimum of each table
	numTables uint32   // tables defined
	// tableMaxTotal is the sum of the tables' effective maxima (elements);
	// tableMinTotal the sum of their minima; tableGrows reports a
	// table.grow anywhere in the code (else no table outgrows its minimum).
	tableMaxTotal, tableMinTotal uint64
	tableGrows                   bool
	// stateOps names the first instruction found in the code that changes
	// instance state other than the memory and the globals (a table or a
	// segment's dropped flag); "" when there is none, so that the state
	// an instance reaches is its memory and its mutable globals
	// (snapshot.go).
	stateOps string
	// mutGlobals are the indexes of the defined mutable globals of a
	// numeric type, in order; the pass exports each as
	// globalPrefix+decimal(its position in mutGlobals). refGlobals counts
	// mutable globals of a reference type (not exported; their instances
	// are never reused).
	mutGlobals   []uint32
	refGlobals   int
	globalPrefix string
	// blockTypes maps the results of a multi-value function type to the
	// index of a type () -> results (the block type of its body's wrapper).
	blockTypes map[string]uint32
	segments   []segment
	numData    int
	// The fuel counter (§20.5): a mutable i64 global appended to the
	// module's globals and exported as FuelExport.
	numImpGlobals int
	numGlobals    int
	noFuel        bool // leave the fuel out (tests)
	hasStart      bool
	nanSites      int    // float instructions followed by a canonicalisation
	rewritten     []byte // the module to compile
	numImpFunc    int
	funcTypes     []uint32 // type index of every function (imports first)
}

// reader reads the binary format.
type reader struct {
	b   []byte
	off int
}

func (r *reader) fail(format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", errMalformed, r.off, fmt.Sprintf(format, args...))
}

func (r *reader) byte1() (byte, error) {
	if r.off >= len(r.b) {
		return 0, r.fail("unexpected end")
	}
	c := r.b[r.off]
	r.off++
	return c, nil
}

func (r *reader) take(n uint32) ([]byte, error) {
	if uint64(n) > uint64(len(r.b)-r.off) {
		return nil, r.fail("length %d exceeds the %d bytes remaining", n, len(r.b)-r.off)
	}
	s := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return s, nil
}

// uleb reads an unsigned LEB128 of at most bits bits, rejecting
// over-long encodings and set bits beyond the width.
func (r *reader) uleb(bits uint) (uint64, error) {
	var v uint64
	var shift uint
	for {
		c, err := r.byte1()
		if err != nil {
			return 0, err
		}
		if shift+7 >= bits && c&0x7F>>(bits-shift) != 0 {
			return 0, r.fail("integer too large")
		}
		v |= uint64(c&0x7F) << shift
		shift += 7
		if c&0x80 == 0 {
			return v, nil
		}
		if shift >= bits {
			return 0, r.fail("integer representation too long")
		}
	}
}

func (r *reader) u32() (uint32, error) {
	v, err := r.uleb(32)
	return uint32(v), err
}

// sleb reads a signed LEB128 of at most bits bits; the unused bits of the
// last byte must all equal the sign bit.
func (r *reader) sleb(bits uint) (int64, error) {
	var v int64
	var shift uint
	for {
		c, err := r.byte1()
		if err != nil {
			return 0, err
		}
		if shift+7 >= bits {
			// Bits of c at positions bits-shift-1 .. 6 must all be equal
			// (the sign bit and its extension); bit 7 must be clear.
			if c&0x80 != 0 {
				return 0, r.fail("integer representation too long")
			}
			used := bits - shift // value bits in this byte, including the sign
			ext := int8(c<<1) >> 1 >> (used - 1)
			if ext != 0 && ext != -1 {
				return 0, r.fail("integer too large")
			}
		}
		v |= int64(c&0x7F) << shift
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v, nil
		}
	}
}

// count reads a vector's element count, which the rest of the section must
// be able to hold (every element takes at least one byte): so no count is
// ever trusted for an allocation.
func (r *reader) count(what string) (uint32, error) {
	n, err := r.u32()
	if err != nil {
		return 0, err
	}
	if uint64(n) > uint64(len(r.b)-r.off) {
		return 0, r.fail("%s count %d exceeds the section", what, n)
	}
	return n, nil
}

// globalType reads a value type and a mutability flag.
// globalType reads a global type: its value type and whether it is
// mutable.
func (r *reader) globalType() (byte, bool, error) {
	t, err := r.valtype()
	if err != nil {
		return 0, false, err
	}
	m, err := r.byte1()
	if err != nil {
		return 0, false, err
	}
	if m > 1 {
		return 0, false, r.fail("global mutability 0x%02x", m)
	}
	return t, m == 1, nil
}

func (r *reader) name() (string, error) {
	n, err := r.u32()
	if err != nil {
		return "", err
	}
	s, err := r.take(n)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(s) {
		return "", r.fail("name is not valid UTF-8")
	}
	return string(s), nil
}

func (r *reader) valtype() (byte, error) {
	t, err := r.byte1()
	if err != nil {
		return 0, err
	}
	switch t {
	case typeI32, typeI64, typeF32, typeF64, typeFuncref, typeExternref:
		return t, nil
	case typeV128:
		return 0, r.fail("v128 values (SIMD) are not supported")
	}
	return 0, r.fail("unknown value type 0x%02x", t)
}

func (r *reader) valtypes() ([]byte, error) {
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	if uint64(n) > uint64(len(r.b)-r.off) {
		return nil, r.fail("count %d exceeds the bytes remaining", n)
	}
	ts := make([]byte, n)
	for i := range ts {
		if ts[i], err = r.valtype(); err != nil {
			return nil, err
		}
	}
	return ts, nil
}

// limits reads a limits value (flags 0x00 or 0x01 only: no shared or 64-bit
// memories) and returns min, max and whether max is present.
func (r *reader) limits() (uint32, uint32, bool, error) {
	flag, err := r.byte1()
	if err != nil {
		return 0, 0, false, err
	}
	if flag > 1 {
		return 0, 0, false, r.fail("limits flag 0x%02x (shared or 64-bit memories are not supported)", flag)
	}
	lo, err := r.u32()
	if err != nil {
		return 0, 0, false, err
	}
	if flag == 0 {
		return lo, 0, false, nil
	}
	hi, err := r.u32()
	return lo, hi, true, err
}

func appendU32(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// clampMax is the maximum the pass writes: min(declared maximum, limit), or
// the limit when none is declared; but never below the minimum when the
// declared limits are valid (a minimum above the limit is rejected after
// validation, with its own status code, and must not turn into a
// validation failure).
func clampMax(lo, hi uint32, hasHi bool, limit uint32) uint32 {
	valid := !hasHi || hi >= lo
	if !hasHi || hi > limit {
		hi = limit
	}
	if valid && hi < lo {
		hi = lo
	}
	return hi
}

func appendLimits(b []byte, lo, hi uint32) []byte {
	b = append(b, 0x01)
	b = appendU32(b, lo)
	return appendU32(b, hi)
}

// Section ids in their required order (the data count section, 12, comes
// between element and code).
var sectionRank = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6, 7: 7, 8: 8, 9: 9, 12: 10, 10: 11, 11: 12}

var wasmHeader = []byte{0x00, 0x61, 0x73, 0x6D, 0x01, 0x00, 0x00, 0x00}

// decodeModule runs the pass over module with the given memory page limit.
func decodeModule(module []byte, maxPages uint32) (*decoded, error) {
	return decodeModuleFuel(module, maxPages, true)
}

// decodeModuleFuel is decodeModule, with the fuel charges and the fuel
// counter left out when fuel is false (for tests that compare the rewrite
// with the module under the same limits).
func decodeModuleFuel(module []byte, maxPages uint32, fuel bool) (*decoded, error) {
	if len(module) < 8 || string(module[:8]) != string(wasmHeader) {
		return nil, fmt.Errorf("%w: not a WebAssembly 1.0/2.0 binary (bad magic or version)", errMalformed)
	}
	d := &decoded{noFuel: !fuel}
	out := make([]byte, 0, len(module)+len(module)/8)
	out = append(out, wasmHeader...)
	r := &reader{b: module, off: 8}
	lastRank := 0
	numFuncs := -1 // declared in the function section
	codeSeen := false
	dataSeen := false
	globalDone, exportDone := !fuel, !fuel
	dataCount := int64(-1)
	for r.off < len(module) {
		id, _ := r.byte1()
		size, err := r.u32()
		if err != nil {
			return nil, err
		}
		body, err := r.take(size)
		if err != nil {
			return nil, err
		}
		sr := &reader{b: body}
		if id == 0 {
			if _, err := sr.name(); err != nil {
				return nil, fmt.Errorf("custom section: %w", err)
			}
			continue // dropped
		}
		rank, ok := sectionRank[id]
		if !ok {
			return nil, fmt.Errorf("%w: unknown section id %d", errMalformed, id)
		}
		if rank <= lastRank {
			return nil, fmt.Errorf("%w: section %d out of order or repeated", errMalformed, id)
		}
		lastRank = rank
		newBody := body
		switch id {
		case 1:
			newBody, err = d.typeSection(sr, fuel)
		case 2:
			err = d.importSection(sr)
		case 3:
			numFuncs, err = d.functionSection(sr)
		case 4:
			newBody, err = d.tableSection(sr)
		case 5:
			newBody, err = d.memorySection(sr, maxPages)
		case 6:
			err = d.globalSection(sr)
		case 7:
			err = d.exportSection(sr)
		case 8:
			d.hasStart = true
		case 9:
			err = d.elementSection(sr)
		case 11:
			err = d.dataSection(sr)
			dataSeen = true
		case 12:
			var c uint32
			c, err = sr.u32()
			dataCount = int64(c)
		case 10:
			codeSeen = true
			newBody, err = d.codeSection(sr, numFuncs)
		}
		if err != nil {
			return nil, fmt.Errorf("section %d: %w", id, err)
		}
		if id != 1 && id != 4 && id != 5 && id != 8 && id != 10 {
			if sr.off != len(body) {
				return nil, fmt.Errorf("section %d: %w: %d trailing bytes", id, errMalformed, len(body)-sr.off)
			}
		}
		if rank > sectionRank[6] && !globalDone {
			out, globalDone = appendSection(out, 6, d.fuelGlobalSection(nil)), true
		}
		if rank > sectionRank[7] && !exportDone {
			out, exportDone = appendSection(out, 7, d.fuelExportSection(nil)), true
		}
		switch {
		case id == 6 && fuel:
			newBody, globalDone = d.fuelGlobalSection(body), true
		case id == 7 && fuel:
			newBody, exportDone = d.fuelExportSection(body), true
		}
		out = appendSection(out, id, newBody)
	}
	if !globalDone {
		out = appendSection(out, 6, d.fuelGlobalSection(nil))
	}
	if !exportDone {
		out = appendSection(out, 7, d.fuelExportSection(nil))
	}
	if dataCount >= 0 && (dataCount != int64(d.numData) || (!dataSeen && dataCount != 0)) {
		return nil, fmt.Errorf("%w: data count %d for %d data segments", errMalformed, dataCount, d.numData)
	}
	if numFuncs > 0 && !codeSeen {
		return nil, fmt.Errorf("%w: %d functions declared but no code section", errMalformed, numFuncs)
	}
	d.rewritten = out
	return d, nil
}

// typeSection reads the types. With rewrite it returns the section with a
// type () -> R appended for every result list R of two or more values that
// has no such type yet: the block type of the wrapper of a body of that
// result (rewriteBody).
func (d *decoded) typeSection(r *reader, rewrite bool) ([]byte, error) {
	n, err := r.count("type")
	if err != nil {
		return nil, err
	}
	d.types = make([]FuncType, 0, n)
	for range n {
		if c, err := r.byte1(); err != nil {
			return nil, err
		} else if c != 0x60 {
			return nil, r.fail("function type starts with 0x%02x, want 0x60", c)
		}
		p, err := r.valtypes()
		if err != nil {
			return nil, err
		}
		res, err := r.valtypes()
		if err != nil {
			return nil, err
		}
		d.types = append(d.types, FuncType{Params: p, Results: res})
	}
	if r.off != len(r.b) {
		return nil, r.fail("%d trailing bytes", len(r.b)-r.off)
	}
	if !rewrite {
		return r.b, nil
	}
	d.blockTypes = map[string]uint32{}
	for i, t := range d.types {
		if len(t.Params) == 0 && len(t.Results) >= 2 {
			if _, ok := d.blockTypes[string(t.Results)]; !ok {
				d.blockTypes[string(t.Results)] = uint32(i)
			}
		}
	}
	var extra []byte
	next := n
	for _, t := range d.types {
		if len(t.Results) < 2 {
			continue
		}
		if _, ok := d.blockTypes[string(t.Results)]; ok {
			continue
		}
		d.blockTypes[string(t.Results)] = next
		next++
		extra = append(extra, 0x60, 0x00)
		extra = appendU32(extra, uint32(len(t.Results)))
		extra = append(extra, t.Results...)
	}
	if next == n {
		return r.b, nil
	}
	out := appendU32(nil, next)
	out = append(out, r.b[len(appendU32(nil, n)):]...)
	return append(out, extra...), nil
}

func (d *decoded) importSection(r *reader) error {
	n, err := r.count("import")
	if err != nil {
		return err
	}
	for range n {
		var im Import
		if im.Module, err = r.name(); err != nil {
			return err
		}
		if im.Name, err = r.name(); err != nil {
			return err
		}
		kind, err := r.byte1()
		if err != nil {
			return err
		}
		switch kind {
		case 0:
			ti, err := r.u32()
			if err != nil {
				return err
			}
			if uint64(ti) >= uint64(len(d.types)) {
				return r.fail("import type index %d out of range", ti)
			}
			im.Type = d.types[ti]
			d.funcTypes = append(d.funcTypes, ti)
			d.numImpFunc++
		case 1:
			if _, err := r.valtype(); err != nil {
				return err
			}
			if _, _, _, err := r.limits(); err != nil {
				return err
			}
		case 2:
			if _, _, _, err := r.limits(); err != nil {
				return err
			}
			d.hasMemory = true
		case 3:
			if _, _, err := r.globalType(); err != nil {
				return err
			}
			d.numImpGlobals++
		default:
			return r.fail("import kind 0x%02x", kind)
		}
		im.Kind = kindNames[kind]
		d.imports = append(d.imports, im)
	}
	return nil
}

func (d *decoded) functionSection(r *reader) (int, error) {
	n, err := r.count("function")
	if err != nil {
		return 0, err
	}
	for range n {
		ti, err := r.u32()
		if err != nil {
			return 0, err
		}
		if uint64(ti) >= uint64(len(d.types)) {
			return 0, r.fail("function type index %d out of range", ti)
		}
		d.funcTypes = append(d.funcTypes, ti)
	}
	return int(n), nil
}

func (d *decoded) tableSection(r *reader) ([]byte, error) {
	n, err := r.count("table")
	if err != nil {
		return nil, err
	}
	d.numTables = n
	limit := uint32(MaxTableElements)
	if n > 0 {
		limit = MaxTableElements / n
	}
	out := appendU32(nil, n)
	for range n {
		t, err := r.valtype()
		if err != nil {
			return nil, err
		}
		lo, hi, hasHi, err := r.limits()
		if err != nil {
			return nil, err
		}
		if uint64(lo) > d.tableMin {
			d.tableMin = uint64(lo)
		}
		d.tableMins = append(d.tableMins, lo)
		eff := clampMax(lo, hi, hasHi, limit)
		d.tableMaxTotal += uint64(eff)
		d.tableMinTotal += uint64(lo)
		out = appendLimits(append(out, t), lo, eff)
	}
	if r.off != len(r.b) {
		return nil, r.fail("%d trailing bytes", len(r.b)-r.off)
	}
	return out, nil
}

// tableReserve is the table elements a call reserves in the memory budget
// (SPECS.md §20.8): the effective maxima when the code can grow a table,
// else the minima (which no other instruction changes).
func (d *decoded) tableReserve() uint64 {
	if d.tableGrows {
		return d.tableMaxTotal
	}
	return d.tableMinTotal
}

// tableLimit is the largest effective maximum of each table: the tables
// share MaxTableElements evenly.
func (d *decoded) tableLimit() uint64 {
	return MaxTableElements / max(uint64(d.numTables), 1)
}

func (d *decoded) memorySection(r *reader, maxPages uint32) ([]byte, error) {
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	if n > 1 || (n == 1 && d.hasMemory) {
		return nil, r.fail("more than one memory")
	}
	out := appendU32(nil, n)
	if n == 1 {
		lo, hi, hasHi, err := r.limits()
		if err != nil {
			return nil, err
		}
		if lo > 65536 || (hasHi && hi > 65536) {
			return nil, r.fail("memory limits above 65536 pages")
		}
		d.hasMemory, d.memMin, d.memMax, d.hasMemMax = true, lo, hi, hasHi
		out = appendLimits(out, lo, clampMax(lo, hi, hasHi, min(maxPages, MaxLinearPages)))
	}
	if r.off != len(r.b) {
		return nil, r.fail("%d trailing bytes", len(r.b)-r.off)
	}
	return out, nil
}

func (d *decoded) exportSection(r *reader) error {
	n, err := r.count("export")
	if err != nil {
		return err
	}
	seen := make(map[string]bool, n)
	for range n {
		var e Export
		if e.Name, err = r.name(); err != nil {
			return err
		}
		if seen[e.Name] {
			return r.fail("duplicate export name %q", e.Name)
		}
		if e.Name == FuelExport || e.Name == StackExport {
			return r.fail("export name %q is reserved", e.Name)
		}
		seen[e.Name] = true
		kind, err := r.byte1()
		if err != nil {
			return err
		}
		if kind > 3 {
			return r.fail("export kind 0x%02x", kind)
		}
		idx, err := r.u32()
		if err != nil {
			return err
		}
		e.Kind = kindNames[kind]
		if kind == 0 {
			if uint64(idx) >= uint64(len(d.funcTypes)) {
				return r.fail("exported function index %d out of range", idx)
			}
			e.Type = d.types[d.funcTypes[idx]]
		}
		d.exports = append(d.exports, e)
	}
	return nil
}

// Canonical NaNs (positive, quiet, zero payload).
const (
	CanonicalNaN32 uint32 = 0x7FC00000
	CanonicalNaN64 uint64 = 0x7FF8000000000000
)

// nanOps maps every instruction whose result may be a NaN with a
// nondeterministic bit pattern to the width of its result (4: f32, 8: f64).
// Bit-exact instructions (abs, neg, copysign, loads, stores, reinterpret,
// const, select, locals, globals) and integer-to-float conversions (never
// NaN) are not in it.
var nanOps = func() [256]byte {
	var t [256]byte
	for op := 0x8D; op <= 0x97; op++ { // f32 ceil floor trunc nearest sqrt add sub mul div min max
		t[op] = 4
	}
	for op := 0x9B; op <= 0xA5; op++ { // f64 ceil floor trunc nearest sqrt add sub mul div min max
		t[op] = 8
	}
	t[0xB6] = 4 // f32.demote_f64
	t[0xBB] = 8 // f64.promote_f32
	return t
}()

// canonSeq appends: local.tee L; fN.const canonical; local.get L;
// local.get L; fN.eq; select — which leaves x if x == x, else the
// canonical NaN.
func canonSeq(b []byte, width byte, local uint32) []byte {
	b = appendU32(append(b, 0x22), local)
	if width == 4 {
		b = binary.LittleEndian.AppendUint32(append(b, 0x43), CanonicalNaN32)
	} else {
		b = binary.LittleEndian.AppendUint64(append(b, 0x44), CanonicalNaN64)
	}
	b = appendU32(append(b, 0x20), local)
	b = appendU32(append(b, 0x20), local)
	if width == 4 {
		b = append(b, 0x5B) // f32.eq
	} else {
		b = append(b, 0x61) // f64.eq
	}
	return append(b, 0x1B) // select
}

func (d *decoded) codeSection(r *reader, numFuncs int) ([]byte, error) {
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	if numFuncs < 0 {
		numFuncs = 0
	}
	if int64(n) != int64(numFuncs) {
		return nil, r.fail("%d function bodies for %d functions", n, numFuncs)
	}
	out := make([]byte, 0, len(r.b)+len(r.b)/8)
	out = appendU32(out, n)
	var fn []byte
	for i := range n {
		size, err := r.u32()
		if err != nil {
			return nil, err
		}
		body, err := r.take(size)
		if err != nil {
			return nil, err
		}
		ft := d.types[d.funcTypes[d.numImpFunc+int(i)]]
		fn, err = d.rewriteBody(fn[:0], body, uint32(len(ft.Params)), ft.Results)
		if err != nil {
			return nil, fmt.Errorf("function %d: %w", d.numImpFunc+int(i), err)
		}
		out = appendU32(out, uint32(len(fn)))
		out = append(out, fn...)
	}
	if r.off != len(r.b) {
		return nil, r.fail("%d trailing bytes", len(r.b)-r.off)
	}
	return out, nil
}

// rewriteBody appends the rewritten function body to out.
func (d *decoded) rewriteBody(out, body []byte, numParams uint32, results []byte) ([]byte, error) {
	r := &reader{b: body}
	groups, err := r.u32()
	if err != nil {
		return nil, err
	}
	if uint64(groups) > uint64(len(body)) {
		return nil, r.fail("local group count %d exceeds the body", groups)
	}
	var total uint64
	for range groups {
		c, err := r.u32()
		if err != nil {
			return nil, err
		}
		if _, err := r.valtype(); err != nil {
			return nil, err
		}
		total += uint64(c)
		if total > MaxFunctionLocals {
			return nil, r.fail("more than %d locals", MaxFunctionLocals)
		}
	}
	localsEnd := r.off
	code := body[localsEnd:]
	// First pass: does the body hold any NaN-producing instruction?
	sites, err := walkCode(code, nil, 0, 0)
	if err != nil {
		return nil, err
	}
	grows, op := stateInstructions(code)
	d.tableGrows = d.tableGrows || grows
	if d.stateOps == "" {
		d.stateOps = op
	}
	d.nanSites += sites
	groupsLen := len(appendU32(nil, groups))
	if sites == 0 {
		out = append(out, body[:localsEnd]...)
	} else {
		// Scratch locals: one f32 at index numParams+total, one f64 after it.
		out = appendU32(out, groups+2)
		out = append(out, body[groupsLen:localsEnd]...)
		out = append(out, 0x01, typeF32, 0x01, typeF64)
	}
	fuel := int64(d.fuelIndex())
	if d.noFuel {
		fuel = -1
		if _, err := walkCode(code, &out, numParams+uint32(total), fuel); err != nil {
			return nil, err
		}
		return out, nil
	}
	// The entry costs one unit of fuel, then the frame's stack units; the
	// body runs in a block of the function's results, whose end takes the
	// units off again (every return is a branch to it).
	cost := uint32(min(uint64(FrameUnits)+uint64(numParams)+total, MaxStackUnits+1))
	out = fuelSeq(out, uint32(fuel))
	out = stackEnterSeq(out, d.stackIndex(), cost)
	out = d.appendBlockType(append(out, 0x02), results)
	if _, err := walkCode(code, &out, numParams+uint32(total), fuel); err != nil {
		return nil, err
	}
	out = stackLeaveSeq(out, d.stackIndex(), cost)
	return append(out, 0x0B), nil
}

// appendBlockType appends the block type of a body with these results.
func (d *decoded) appendBlockType(b, results []byte) []byte {
	switch len(results) {
	case 0:
		return append(b, 0x40)
	case 1:
		return append(b, results[0])
	}
	return appendS33(b, int64(d.blockTypes[string(results)]))
}

// appendS33 appends v (0 <= v < 2^32) as a signed LEB128 (a block type
// index).
func appendS33(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// StackExport is the name under which the pass exports the stack counter;
// a module may not export this name itself.
const StackExport = "amduat.stack"

// stackIndex is the index of the stack counter: right after the fuel
// counter.
func (d *decoded) stackIndex() uint32 { return d.fuelIndex() + 1 }

// stackEnterSeq appends: global.get S; i32.const cost; i32.add;
// global.set S; global.get S; i32.const MaxStackUnits; i32.gt_u; if;
// unreachable; end — the frame's units are added and the call traps when
// the calls in progress would use more than MaxStackUnits.
func stackEnterSeq(b []byte, s, cost uint32) []byte {
	b = appendU32(append(b, 0x23), s)
	b = appendS33(append(b, 0x41), int64(cost))
	b = appendU32(append(b, 0x6A, 0x24), s)
	b = appendU32(append(b, 0x23), s)
	b = appendS33(append(b, 0x41), MaxStackUnits)
	return append(b, 0x4B, 0x04, 0x40, 0x00, 0x0B)
}

// stackLeaveSeq appends: global.get S; i32.const cost; i32.sub;
// global.set S.
func stackLeaveSeq(b []byte, s, cost uint32) []byte {
	b = appendU32(append(b, 0x23), s)
	b = appendS33(append(b, 0x41), int64(cost))
	return appendU32(append(b, 0x6B, 0x24), s)
}

// FuelExport is the name under which the pass exports the fuel counter; a
// module may not export this name itself.
const FuelExport = "amduat.fuel"

// fuelIndex is the index of the fuel global: after every imported and
// defined global.
func (d *decoded) fuelIndex() uint32 { return uint32(d.numImpGlobals + d.numGlobals) }

// fuelSeq appends the charge of one unit of fuel:
// global.get F; i64.const 1; i64.sub; global.set F; global.get F; i64.eqz;
// if; unreachable; end — the counter drops by one and the call traps when
// it reaches zero.
func fuelSeq(b []byte, fuel uint32) []byte {
	b = appendU32(append(b, 0x23), fuel)
	b = append(b, 0x42, 0x01, 0x7D)
	b = appendU32(append(b, 0x24), fuel)
	b = appendU32(append(b, 0x23), fuel)
	return append(b, 0x50, 0x04, 0x40, 0x00, 0x0B)
}

// fuelGlobalSection returns the global section with the fuel counter and
// the stack counter appended (a mutable i64 starting at 0, which the host
// sets before any code runs, and a mutable i32 starting at 0). body is the
// original section, nil when the module has none.
func (d *decoded) fuelGlobalSection(body []byte) []byte {
	out := appendU32(nil, uint32(d.numGlobals)+2)
	if body != nil {
		out = append(out, body[len(appendU32(nil, uint32(d.numGlobals))):]...)
	}
	out = append(out, typeI64, 0x01, 0x42, 0x00, 0x0B)
	return append(out, typeI32, 0x01, 0x41, 0x00, 0x0B)
}

// fuelExportSection returns the export section with the exports of the
// fuel and stack counters appended, then one export of each mutable
// global of a numeric type (mutGlobals), which the engine reads and sets
// to take and restore snapshots (snapshot.go). Those are named
// globalPrefix followed by the global's position in mutGlobals in
// decimal, globalPrefix being "amduat.global." extended with as many "."
// as needed for no export of the module to start with it, so the names
// never collide.
func (d *decoded) fuelExportSection(body []byte) []byte {
	d.globalPrefix = "amduat.global."
	for _, x := range d.exports {
		for strings.HasPrefix(x.Name, d.globalPrefix) {
			d.globalPrefix += "."
		}
	}
	out := appendU32(nil, uint32(len(d.exports)+2+len(d.mutGlobals)))
	if body != nil {
		out = append(out, body[len(appendU32(nil, uint32(len(d.exports)))):]...)
	}
	export := func(name string, global uint32) {
		out = appendU32(out, uint32(len(name)))
		out = append(out, name...)
		out = append(out, 0x03)
		out = appendU32(out, global)
	}
	export(FuelExport, d.fuelIndex())
	export(StackExport, d.stackIndex())
	for i, g := range d.mutGlobals {
		export(d.globalExport(i), g)
	}
	return out
}

// globalExport is the name the pass exports mutGlobals[i] under.
func (d *decoded) globalExport(i int) string {
	return d.globalPrefix + strconv.Itoa(i)
}

func appendSection(out []byte, id byte, body []byte) []byte {
	out = append(out, id)
	out = appendU32(out, uint32(len(body)))
	return append(out, body...)
}

// stateInstructions reports whether the (valid) expression code holds a
// table.grow instruction (0xFC 15), and names the first instruction in it
// that changes a table or drops a segment ("" when there is none):
// table.set, table.grow, table.fill, table.copy, table.init, elem.drop,
// data.drop.
func stateInstructions(code []byte) (grows bool, state string) {
	r := &reader{b: code}
	depth := 0
	for depth >= 0 {
		op, err := r.byte1()
		if err != nil {
			break
		}
		if op == 0x26 && state == "" {
			state = "table.set"
		}
		if op == 0xFC && r.off < len(r.b) {
			name := stateOpNames[r.b[r.off]]
			if name != "" && state == "" {
				state = name
			}
			if r.b[r.off] == 15 {
				grows = true
			}
		}
		if skipImmediates(r, op, &depth) != nil {
			break
		}
	}
	return grows, state
}

// stateOpNames names the 0xFC instructions (by their one-byte
// sub-opcode) that change a table or drop a segment.
var stateOpNames = [256]string{9: "data.drop", 12: "table.init", 13: "elem.drop", 14: "table.copy", 15: "table.grow", 17: "table.fill"}

// walkCode decodes the expression code (ending with the end of the
// function) instruction by instruction. It returns the number of
// NaN-producing instructions. When out is non-nil it appends the code to it
// with a canonicalisation after each of them, using scratch (f32) and
// scratch+1 (f64) as the temporary locals.
func walkCode(code []byte, out *[]byte, scratch uint32, fuel int64) (int, error) {
	r := &reader{b: code}
	depth := 0
	sites := 0
	for {
		start := r.off
		op, err := r.byte1()
		if err != nil {
			return 0, err
		}
		if err := skipImmediates(r, op, &depth); err != nil {
			return 0, err
		}
		if out != nil {
			if op == 0x0F && fuel >= 0 { // return: a branch to the body's wrapper
				*out = appendU32(append(*out, 0x0C), uint32(depth))
			} else {
				*out = append(*out, code[start:r.off]...)
			}
			if op == 0x03 && fuel >= 0 { // loop: each iteration costs one unit
				*out = fuelSeq(*out, uint32(fuel))
			}
		}
		if w := nanOps[op]; w != 0 {
			sites++
			if out != nil {
				local := scratch
				if w == 8 {
					local++
				}
				*out = canonSeq(*out, w, local)
			}
		}
		if depth < 0 {
			if r.off != len(code) {
				return 0, r.fail("%d bytes after the end of the function", len(code)-r.off)
			}
			return sites, nil
		}
	}
}

// skipImmediates reads the immediates of the instruction op and tracks the
// block depth (the function's end takes it to -1).
func skipImmediates(r *reader, op byte, depth *int) error {
	var err error
	switch {
	case op == 0x02 || op == 0x03 || op == 0x04: // block loop if
		*depth++
		return blockType(r)
	case op == 0x0B: // end
		*depth--
	case op == 0x05: // else
		if *depth == 0 {
			return r.fail("else outside a block")
		}
	case op == 0x00 || op == 0x01 || op == 0x0F || op == 0x1A || op == 0x1B || op == 0xD1:
		// unreachable nop return drop select ref.is_null
	case op == 0x0C || op == 0x0D || op == 0x10 || op == 0xD2 || (op >= 0x20 && op <= 0x26):
		// br br_if call ref.func local.* global.* table.get table.set
		_, err = r.u32()
	case op == 0x0E: // br_table
		var n uint32
		if n, err = r.u32(); err != nil {
			return err
		}
		if uint64(n) > uint64(len(r.b)-r.off) {
			return r.fail("br_table count %d exceeds the body", n)
		}
		for range n + 1 {
			if _, err = r.u32(); err != nil {
				return err
			}
		}
	case op == 0x11: // call_indirect typeidx tableidx
		if _, err = r.u32(); err == nil {
			_, err = r.u32()
		}
	case op == 0x1C: // select with types
		var ts []byte
		if ts, err = r.valtypes(); err == nil && len(ts) != 1 {
			return r.fail("typed select with %d types", len(ts))
		}
	case op >= 0x28 && op <= 0x3E: // loads and stores: memarg
		if _, err = r.u32(); err == nil {
			_, err = r.u32()
		}
	case op == 0x3F || op == 0x40: // memory.size memory.grow
		err = zeroByte(r)
	case op == 0x41:
		_, err = r.sleb(32)
	case op == 0x42:
		_, err = r.sleb(64)
	case op == 0x43:
		_, err = r.take(4)
	case op == 0x44:
		_, err = r.take(8)
	case op >= 0x45 && op <= 0xC4: // numeric, no immediates
	case op == 0xD0: // ref.null reftype
		var t byte
		if t, err = r.byte1(); err == nil && t != typeFuncref && t != typeExternref {
			return r.fail("ref.null of type 0x%02x", t)
		}
	case op == 0xFC:
		return prefixedFC(r)
	case op == 0xFD:
		return r.fail("SIMD instructions (0xFD) are not supported")
	case op == 0xFE:
		return r.fail("thread instructions (0xFE) are not supported")
	default:
		return r.fail("unknown opcode 0x%02x", op)
	}
	return err
}

func zeroByte(r *reader) error {
	c, err := r.byte1()
	if err == nil && c != 0 {
		return r.fail("reserved byte 0x%02x, want 0x00", c)
	}
	return err
}

func blockType(r *reader) error {
	if r.off >= len(r.b) {
		return r.fail("unexpected end")
	}
	switch c := r.b[r.off]; c {
	case 0x40, typeI32, typeI64, typeF32, typeF64, typeFuncref, typeExternref:
		r.off++
		return nil
	case typeV128:
		return r.fail("v128 block type (SIMD) is not supported")
	}
	v, err := r.sleb(33)
	if err != nil {
		return err
	}
	if v < 0 || v > math.MaxUint32 {
		return r.fail("block type index %d", v)
	}
	return nil
}

// prefixedFC reads a 0xFC instruction: saturating truncations (0-7) and
// bulk memory and table instructions (8-17).
func prefixedFC(r *reader) error {
	sub, err := r.u32()
	if err != nil {
		return err
	}
	switch {
	case sub <= 7:
		return nil
	case sub == 8: // memory.init dataidx 0x00
		if _, err := r.u32(); err != nil {
			return err
		}
		return zeroByte(r)
	case sub == 9 || sub == 13 || (sub >= 15 && sub <= 17): // data.drop elem.drop table.grow table.size table.fill
		_, err = r.u32()
		return err
	case sub == 10: // memory.copy 0x00 0x00
		if err := zeroByte(r); err != nil {
			return err
		}
		return zeroByte(r)
	case sub == 11: // memory.fill 0x00
		return zeroByte(r)
	case sub == 12 || sub == 14: // table.init elemidx tableidx, table.copy dst src
		if _, err := r.u32(); err != nil {
			return err
		}
		_, err = r.u32()
		return err
	}
	return r.fail("unknown instruction 0xFC %d", sub)
}

// segment is an active element or data segment: where instantiation
// writes it.
type segment struct {
	data   bool   // data segment (else element segment)
	index  int    // its index in its section
	target uint32 // table index (element segments)
	offset uint32
	length uint64
}

// constOffset reads an offset expression. With no global imports allowed,
// a valid one is always i32.const n followed by end.
func (r *reader) constOffset() (uint32, error) {
	if op, err := r.byte1(); err != nil {
		return 0, err
	} else if op != 0x41 {
		return 0, r.fail("offset expression is not i32.const")
	}
	v, err := r.sleb(32)
	if err != nil {
		return 0, err
	}
	if end, err := r.byte1(); err != nil {
		return 0, err
	} else if end != 0x0B {
		return 0, r.fail("offset expression is not i32.const")
	}
	return uint32(v), nil
}

// skipExpr skips a constant expression up to and including its end.
func (r *reader) skipExpr() error {
	depth := 0
	for depth >= 0 {
		op, err := r.byte1()
		if err != nil {
			return err
		}
		if err := skipImmediates(r, op, &depth); err != nil {
			return err
		}
	}
	return nil
}

func (d *decoded) globalSection(r *reader) error {
	n, err := r.count("global")
	if err != nil {
		return err
	}
	d.numGlobals = int(n)
	for i := range n {
		t, mut, err := r.globalType()
		if err != nil {
			return err
		}
		switch {
		case !mut:
		case t == typeFuncref || t == typeExternref:
			d.refGlobals++
		default:
			d.mutGlobals = append(d.mutGlobals, uint32(d.numImpGlobals)+i)
		}
		if err := r.skipExpr(); err != nil {
			return err
		}
	}
	return nil
}

func (d *decoded) elementSection(r *reader) error {
	n, err := r.count("element")
	if err != nil {
		return err
	}
	for i := range n {
		flag, err := r.u32()
		if err != nil {
			return err
		}
		if flag > 7 {
			return r.fail("element segment flag %d", flag)
		}
		active := flag&1 == 0
		seg := segment{index: int(i)}
		if flag&2 != 0 && active { // explicit table index
			if seg.target, err = r.u32(); err != nil {
				return err
			}
		}
		if active {
			if seg.offset, err = r.constOffset(); err != nil {
				return err
			}
		}
		if flag&3 != 0 { // elemkind (flags 1-3) or reftype (flags 5-7)
			if _, err := r.byte1(); err != nil {
				return err
			}
		}
		count, err := r.u32()
		if err != nil {
			return err
		}
		if uint64(count) > uint64(len(r.b)-r.off) {
			return r.fail("element count %d exceeds the section", count)
		}
		for range count {
			if flag&4 != 0 {
				err = r.skipExpr()
			} else {
				_, err = r.u32()
			}
			if err != nil {
				return err
			}
		}
		if active {
			seg.length = uint64(count)
			d.segments = append(d.segments, seg)
		}
	}
	return nil
}

func (d *decoded) dataSection(r *reader) error {
	n, err := r.count("data")
	if err != nil {
		return err
	}
	d.numData = int(n)
	for i := range n {
		flag, err := r.u32()
		if err != nil {
			return err
		}
		if flag > 2 {
			return r.fail("data segment flag %d", flag)
		}
		seg := segment{data: true, index: int(i)}
		if flag == 2 {
			if seg.target, err = r.u32(); err != nil {
				return err
			}
		}
		if flag != 1 {
			if seg.offset, err = r.constOffset(); err != nil {
				return err
			}
		}
		size, err := r.u32()
		if err != nil {
			return err
		}
		if _, err := r.take(size); err != nil {
			return err
		}
		if flag != 1 {
			seg.length = uint64(size)
			d.segments = append(d.segments, seg)
		}
	}
	return nil
}

// segmentFailure is the first active segment that does not fit its table
// or memory at instantiation, elements before data (the order in which
// WebAssembly 2.0 instantiation applies them), or "".
func (d *decoded) segmentFailure() string {
	for _, s := range d.segments {
		if s.data {
			continue
		}
		var size uint64
		if int(s.target) < len(d.tableMins) {
			size = uint64(d.tableMins[s.target])
		}
		if uint64(s.offset)+s.length > size {
			return fmt.Sprintf("element segment %d: offset %d + %d elements exceed table %d of %d elements", s.index, s.offset, s.length, s.target, size)
		}
	}
	for _, s := range d.segments {
		if !s.data {
			continue
		}
		size := uint64(d.memMin) * 65536
		if uint64(s.offset)+s.length > size {
			return fmt.Sprintf("data segment %d: offset %d + %d bytes exceed the memory of %d bytes", s.index, s.offset, s.length, size)
		}
	}
	return ""
}
