package opreg

import (
	"crypto/sha256"
	"fmt"
	"math"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/enc"
)

// Kernel operation names (OPREG/PEL1-KERNEL, SPECS.md §11). Every kernel
// operation has version 1.
const (
	NameConst  = "pel.bytes.const"
	NameConcat = "pel.bytes.concat"
	NameSlice  = "pel.bytes.slice"
	NameHash   = "pel.bytes.hash.asl1"
	NameParams = "pel.bytes.params"
)

// Kernel operation ids.
var (
	OpConst  = OperationID{Name: NameConst, Version: 1}
	OpConcat = OperationID{Name: NameConcat, Version: 1}
	OpSlice  = OperationID{Name: NameSlice, Version: 1}
	OpHash   = OperationID{Name: NameHash, Version: 1}
	OpParams = OperationID{Name: NameParams, Version: 1}
)

// KernelOpCode numbers the kernel operations for runtime status codes
// (SPECS.md §11). Code 0 is the scheme itself (SPECS.md §12).
type KernelOpCode uint16

const (
	CodeConst  KernelOpCode = 1
	CodeConcat KernelOpCode = 2
	CodeSlice  KernelOpCode = 3
	CodeHash   KernelOpCode = 4
	CodeParams KernelOpCode = 5
)

// StatusCode is kernel_op_code<<16 | errorIndex. With errorIndex >= 1 the
// result is never 0, 2 or 3.
func StatusCode(op KernelOpCode, errorIndex uint16) uint32 {
	return uint32(op)<<16 | uint32(errorIndex)
}

// Kernel runtime status codes: the whole kernel error table. Only slice has
// a dynamic failure; const, concat, hash.asl1 and params cannot fail at
// runtime (params' missing global artifact is INVALID_INPUTS, not a runtime
// failure).
var (
	// StatusSliceOutOfRange: offset + length exceeds the input's length.
	StatusSliceOutOfRange = StatusCode(CodeSlice, 1)
)

// MaxConstBytes bounds the payload of pel.bytes.const params (1 MiB).
const MaxConstBytes = 1 << 20

// ConstParams is the params value of pel.bytes.const: the output artifact.
type ConstParams struct {
	HasTag bool
	Tag    asl.TypeTag
	Bytes  []byte
}

// SliceParams is the params value of pel.bytes.slice.
type SliceParams struct {
	Offset uint64
	Length uint64
}

// NoParams is the params value of operations whose params are empty.
type NoParams struct{}

// EncodeConstParams returns the canonical ParamsBytes of p:
// has_tag u8 || [tag u32] || bytes32. It fails if p.Bytes exceeds
// MaxConstBytes.
func EncodeConstParams(p ConstParams) ([]byte, error) {
	if len(p.Bytes) > MaxConstBytes {
		return nil, fmt.Errorf("%s params: %d bytes exceed the maximum %d: %w", NameConst, len(p.Bytes), MaxConstBytes, ErrParams)
	}
	w := enc.Writer{Buf: make([]byte, 0, 9+len(p.Bytes))}
	if p.HasTag {
		w.U8(1)
		w.U32(uint32(p.Tag))
	} else {
		w.U8(0)
	}
	w.Bytes32(p.Bytes)
	return w.Buf, nil
}

// DecodeConstParams parses pel.bytes.const params strictly. The returned
// Bytes alias b.
func DecodeConstParams(b []byte) (ConstParams, error) {
	r := enc.NewReader(b)
	var p ConstParams
	off := r.Offset()
	switch flag := r.U8("has_tag"); {
	case r.Err() != nil:
	case flag == 1:
		p.HasTag = true
		p.Tag = asl.TypeTag(r.U32("tag"))
	case flag != 0:
		r.FailAt(off, "has_tag", "value 0x%02x is neither 0x00 nor 0x01", flag)
	}
	lenOff := r.Offset()
	n := r.U32("bytes length")
	switch {
	case r.Err() != nil:
	case uint64(n) > uint64(r.Remaining()):
		r.FailAt(lenOff, "bytes", "length %d exceeds the %d bytes remaining", n, r.Remaining())
	case n > MaxConstBytes:
		r.FailAt(lenOff, "bytes", "length %d exceeds the maximum %d", n, MaxConstBytes)
	default:
		p.Bytes = r.Raw(int(n), "bytes")
	}
	if err := r.Done(); err != nil {
		return ConstParams{}, fmt.Errorf("%s params: %w: %w", NameConst, ErrParams, err)
	}
	if p.Bytes == nil {
		p.Bytes = []byte{}
	}
	return p, nil
}

// EncodeSliceParams returns offset u64 || length u64.
func EncodeSliceParams(p SliceParams) []byte {
	w := enc.Writer{Buf: make([]byte, 0, 16)}
	w.U64(p.Offset)
	w.U64(p.Length)
	return w.Buf
}

// DecodeSliceParams parses exactly 16 bytes: offset u64 || length u64.
func DecodeSliceParams(b []byte) (SliceParams, error) {
	r := enc.NewReader(b)
	p := SliceParams{Offset: r.U64("offset"), Length: r.U64("length")}
	if err := r.Done(); err != nil {
		return SliceParams{}, fmt.Errorf("%s params: %w: %w", NameSlice, ErrParams, err)
	}
	return p, nil
}

func decodeEmpty(name string) func([]byte) (any, error) {
	return func(b []byte) (any, error) {
		if len(b) != 0 {
			return nil, fmt.Errorf("%s params: %w: must be empty, got %d bytes", name, ErrParams, len(b))
		}
		return NoParams{}, nil
	}
}

func encodeEmpty(name string) func(any) ([]byte, error) {
	return func(v any) ([]byte, error) {
		if _, ok := v.(NoParams); !ok {
			return nil, fmt.Errorf("%s params: %w: want opreg.NoParams, got %T", name, ErrParams, v)
		}
		return []byte{}, nil
	}
}

func runConst(c Call) ([]asl.Artifact, *OpError) {
	p := c.Params.(ConstParams)
	return []asl.Artifact{{Bytes: p.Bytes, Tag: p.Tag, HasTag: p.HasTag}}, nil
}

func runConcat(c Call) ([]asl.Artifact, *OpError) {
	if len(c.Inputs) == 1 {
		return []asl.Artifact{{Bytes: c.Inputs[0].Bytes}}, nil
	}
	n := 0
	for _, in := range c.Inputs {
		n += len(in.Bytes)
	}
	out := make([]byte, 0, n)
	for _, in := range c.Inputs {
		out = append(out, in.Bytes...)
	}
	return []asl.Artifact{{Bytes: out}}, nil
}

func runSlice(c Call) ([]asl.Artifact, *OpError) {
	p := c.Params.(SliceParams)
	in := c.Inputs[0].Bytes
	n := uint64(len(in))
	if p.Offset > n || p.Length > n-p.Offset {
		return nil, Fail(StatusSliceOutOfRange, "slice offset %d + length %d exceeds input length %d", p.Offset, p.Length, n)
	}
	return []asl.Artifact{{Bytes: in[p.Offset : p.Offset+p.Length : p.Offset+p.Length]}}, nil
}

func runHash(c Call) ([]asl.Artifact, *OpError) {
	d := sha256.Sum256(c.Inputs[0].Bytes)
	return []asl.Artifact{{Bytes: d[:]}}, nil
}

func runParams(c Call) ([]asl.Artifact, *OpError) {
	return []asl.Artifact{*c.Global}, nil
}

func sizeConst(c Call) (uint64, bool) {
	return uint64(len(c.Params.(ConstParams).Bytes)), true
}

// sizeConcat is the sum of the input lengths; it cannot overflow a uint64,
// since every input is already in memory.
func sizeConcat(c Call) (uint64, bool) {
	var n uint64
	for _, in := range c.Inputs {
		n += uint64(len(in.Bytes))
	}
	return n, true
}

// sizeSlice declares the length only when the slice succeeds; otherwise Run
// reports its runtime error, which a limit must not hide.
func sizeSlice(c Call) (uint64, bool) {
	p := c.Params.(SliceParams)
	n := uint64(len(c.Inputs[0].Bytes))
	if p.Offset > n || p.Length > n-p.Offset {
		return 0, false
	}
	return p.Length, true
}

func sizeHash(Call) (uint64, bool) { return sha256.Size, true }

func sizeParams(c Call) (uint64, bool) { return uint64(len(c.Global.Bytes)), true }

func ropeConst(c RopeCall) ([]*asl.Rope, *OpError, error) {
	p := c.Params.(ConstParams)
	return []*asl.Rope{asl.NewRope(asl.Artifact{Bytes: p.Bytes, Tag: p.Tag, HasTag: p.HasTag})}, nil, nil
}

func ropeConcat(c RopeCall) ([]*asl.Rope, *OpError, error) {
	r, err := asl.ConcatRopes(c.Inputs...)
	if err != nil {
		return nil, nil, err
	}
	return []*asl.Rope{r}, nil, nil
}

func ropeSlice(c RopeCall) ([]*asl.Rope, *OpError, error) {
	p := c.Params.(SliceParams)
	n := c.Inputs[0].Size()
	if p.Offset > n || p.Length > n-p.Offset {
		return nil, Fail(StatusSliceOutOfRange, "slice offset %d + length %d exceeds input length %d", p.Offset, p.Length, n), nil
	}
	r, err := c.Inputs[0].Slice(p.Offset, p.Length)
	if err != nil {
		return nil, nil, err
	}
	return []*asl.Rope{r}, nil, nil
}

// ropeHash streams the input through SHA-256.
func ropeHash(c RopeCall) ([]*asl.Rope, *OpError, error) {
	h := sha256.New()
	if err := c.Inputs[0].CopyTo(c.Ctx, h); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", NameHash, err)
	}
	return []*asl.Rope{asl.NewRope(asl.Artifact{Bytes: h.Sum(nil)})}, nil, nil
}

func ropeParams(c RopeCall) ([]*asl.Rope, *OpError, error) {
	return []*asl.Rope{c.Global}, nil, nil
}

func ropeSizeConst(c RopeCall) (uint64, bool) {
	return uint64(len(c.Params.(ConstParams).Bytes)), true
}

// ropeSizeConcat is the sum of the input lengths, saturated: a sum above
// 2^64-1 cannot be built (RunRope fails with asl.ErrTooLarge), and a limit
// below it stops the run first.
func ropeSizeConcat(c RopeCall) (uint64, bool) {
	var n uint64
	for _, in := range c.Inputs {
		if n+in.Size() < n {
			return math.MaxUint64, true
		}
		n += in.Size()
	}
	return n, true
}

func ropeSizeSlice(c RopeCall) (uint64, bool) {
	p := c.Params.(SliceParams)
	n := c.Inputs[0].Size()
	if p.Offset > n || p.Length > n-p.Offset {
		return 0, false
	}
	return p.Length, true
}

func ropeSizeHash(RopeCall) (uint64, bool) { return sha256.Size, true }

func ropeSizeParams(c RopeCall) (uint64, bool) { return c.Global.Size(), true }

var kernel = mustKernel()

func mustKernel() *Registry {
	r, err := (*Registry)(nil).extend(kernelOps())
	if err != nil {
		panic(err)
	}
	return r
}

func kernelOps() []Operation {
	return []Operation{
		{
			ID: OpConst, MinInputs: 0, MaxInputs: 0,
			DecodeParams: func(b []byte) (any, error) { return DecodeConstParams(b) },
			EncodeParams: func(v any) ([]byte, error) {
				p, ok := v.(ConstParams)
				if !ok {
					return nil, fmt.Errorf("%s params: %w: want opreg.ConstParams, got %T", NameConst, ErrParams, v)
				}
				return EncodeConstParams(p)
			},
			Run:            runConst,
			OutputSize:     sizeConst,
			RunRope:        ropeConst,
			SizeRope:       ropeSizeConst,
			ParamsToJSON:   constToJSON,
			ParamsFromJSON: constFromJSON,
		},
		{
			ID: OpConcat, MinInputs: 1, MaxInputs: Unbounded,
			DecodeParams: decodeEmpty(NameConcat), EncodeParams: encodeEmpty(NameConcat),
			Run:          runConcat,
			OutputSize:   sizeConcat,
			RunRope:      ropeConcat,
			SizeRope:     ropeSizeConcat,
			ParamsToJSON: emptyToJSON, ParamsFromJSON: emptyFromJSON(NameConcat),
		},
		{
			ID: OpSlice, MinInputs: 1, MaxInputs: 1,
			DecodeParams: func(b []byte) (any, error) { return DecodeSliceParams(b) },
			EncodeParams: func(v any) ([]byte, error) {
				p, ok := v.(SliceParams)
				if !ok {
					return nil, fmt.Errorf("%s params: %w: want opreg.SliceParams, got %T", NameSlice, ErrParams, v)
				}
				return EncodeSliceParams(p), nil
			},
			Run:            runSlice,
			OutputSize:     sizeSlice,
			RunRope:        ropeSlice,
			SizeRope:       ropeSizeSlice,
			ParamsToJSON:   sliceToJSON,
			ParamsFromJSON: sliceFromJSON,
		},
		{
			ID: OpHash, MinInputs: 1, MaxInputs: 1,
			DecodeParams: decodeEmpty(NameHash), EncodeParams: encodeEmpty(NameHash),
			Run:          runHash,
			OutputSize:   sizeHash,
			RunRope:      ropeHash,
			SizeRope:     ropeSizeHash,
			ParamsToJSON: emptyToJSON, ParamsFromJSON: emptyFromJSON(NameHash),
		},
		{
			ID: OpParams, MinInputs: 0, MaxInputs: 0, NeedsGlobalParams: true,
			DecodeParams: decodeEmpty(NameParams), EncodeParams: encodeEmpty(NameParams),
			Run:          runParams,
			OutputSize:   sizeParams,
			RunRope:      ropeParams,
			SizeRope:     ropeSizeParams,
			ParamsToJSON: emptyToJSON, ParamsFromJSON: emptyFromJSON(NameParams),
		},
	}
}

// Kernel returns the OPREG/PEL1-KERNEL registry (SPECS.md §11):
//
//	pel.bytes.const@1      0 inputs   params ConstParams   output: the params artifact (bytes and tag)
//	pel.bytes.concat@1     >=1 inputs params empty         output: untagged concatenation of the inputs' bytes
//	pel.bytes.slice@1      1 input    params SliceParams   output: untagged bytes[offset:offset+length]
//	pel.bytes.hash.asl1@1  1 input    params empty         output: untagged 32-byte SHA-256 (HASH-ASL1-256) digest of the input's bytes
//	pel.bytes.params@1     0 inputs   params empty         output: the global params artifact unchanged (bytes and tag)
//
// Every call returns the same shared, immutable registry.
func Kernel() *Registry { return kernel }
