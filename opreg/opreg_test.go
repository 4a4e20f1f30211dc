package opreg_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/enc"
	"github.com/amduat/amduat/opreg"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func kernelOp(t testing.TB, id opreg.OperationID) *opreg.Operation {
	t.Helper()
	op, ok := opreg.Kernel().Lookup(id)
	if !ok {
		t.Fatalf("kernel lacks %s", id)
	}
	return op
}

func TestKernelIDs(t *testing.T) {
	want := []opreg.OperationID{opreg.OpConcat, opreg.OpConst, opreg.OpHash, opreg.OpParams, opreg.OpSlice}
	if got := opreg.Kernel().IDs(); !slices.Equal(got, want) {
		t.Fatalf("IDs = %v, want %v", got, want)
	}
	arity := map[opreg.OperationID]string{
		opreg.OpConst: "exactly 0", opreg.OpConcat: "at least 1", opreg.OpSlice: "exactly 1",
		opreg.OpHash: "exactly 1", opreg.OpParams: "exactly 0",
	}
	for id, a := range arity {
		if got := kernelOp(t, id).ArityString(); got != a {
			t.Errorf("%s arity %q, want %q", id, got, a)
		}
	}
	if !kernelOp(t, opreg.OpParams).NeedsGlobalParams || kernelOp(t, opreg.OpConst).NeedsGlobalParams {
		t.Error("only pel.bytes.params needs the global params")
	}
}

func TestStatusCodes(t *testing.T) {
	if opreg.StatusSliceOutOfRange != 0x00030001 {
		t.Fatalf("slice status 0x%08x", opreg.StatusSliceOutOfRange)
	}
	for _, c := range []opreg.KernelOpCode{opreg.CodeConst, opreg.CodeConcat, opreg.CodeSlice, opreg.CodeHash, opreg.CodeParams} {
		for idx := uint16(1); idx < 4; idx++ {
			if s := opreg.StatusCode(c, idx); s == 0 || s == 2 || s == 3 {
				t.Errorf("StatusCode(%d,%d) = %d is reserved", c, idx, s)
			}
		}
	}
}

func TestParamsCodecs(t *testing.T) {
	big := make([]byte, 4+1+opreg.MaxConstBytes+1)
	big[0] = 0
	copy(big[1:5], []byte{0x00, 0x10, 0x00, 0x01}) // length 1 MiB + 1
	tests := []struct {
		name  string
		op    opreg.OperationID
		hex   string
		bytes []byte
		ok    bool
		value any
	}{
		{"const untagged", opreg.OpConst, "000000000568656c6c6f", nil, true, opreg.ConstParams{Bytes: []byte("hello")}},
		{"const tagged", opreg.OpConst, "01000000420000000161", nil, true, opreg.ConstParams{HasTag: true, Tag: 0x42, Bytes: []byte("a")}},
		{"const empty", opreg.OpConst, "0000000000", nil, true, opreg.ConstParams{Bytes: []byte{}}},
		{"const bad flag", opreg.OpConst, "0200000000", nil, false, nil},
		{"const truncated tag", opreg.OpConst, "01000000", nil, false, nil},
		{"const length past end", opreg.OpConst, "000000000668656c6c6f", nil, false, nil},
		{"const trailing", opreg.OpConst, "000000000568656c6c6f00", nil, false, nil},
		{"const empty params", opreg.OpConst, "", nil, false, nil},
		{"const too large", opreg.OpConst, "", big, false, nil},
		{"slice", opreg.OpSlice, "00000000000000010000000000000003", nil, true, opreg.SliceParams{Offset: 1, Length: 3}},
		{"slice short", opreg.OpSlice, "000000000000000100000000000003", nil, false, nil},
		{"slice long", opreg.OpSlice, "0000000000000001000000000000000300", nil, false, nil},
		{"concat empty", opreg.OpConcat, "", nil, true, opreg.NoParams{}},
		{"concat nonempty", opreg.OpConcat, "00", nil, false, nil},
		{"hash empty", opreg.OpHash, "", nil, true, opreg.NoParams{}},
		{"hash hash id", opreg.OpHash, "0001", nil, false, nil},
		{"params empty", opreg.OpParams, "", nil, true, opreg.NoParams{}},
		{"params nonempty", opreg.OpParams, "ff", nil, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.bytes
			if b == nil {
				b = unhex(t, tt.hex)
			}
			op := kernelOp(t, tt.op)
			v, err := op.DecodeParams(b)
			if !tt.ok {
				if err == nil || !errors.Is(err, opreg.ErrParams) {
					t.Fatalf("decode accepted or wrong error: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !equalParams(v, tt.value) {
				t.Fatalf("value %#v, want %#v", v, tt.value)
			}
			back, err := op.EncodeParams(v)
			if err != nil || !bytes.Equal(back, b) {
				t.Fatalf("re-encode %x, %v; want %x", back, err, b)
			}
		})
	}
}

func equalParams(a, b any) bool {
	ca, ok1 := a.(opreg.ConstParams)
	cb, ok2 := b.(opreg.ConstParams)
	if ok1 && ok2 {
		return ca.HasTag == cb.HasTag && ca.Tag == cb.Tag && bytes.Equal(ca.Bytes, cb.Bytes)
	}
	return a == b
}

func TestDecodeErrorsNameField(t *testing.T) {
	_, err := opreg.DecodeConstParams(unhex(t, "0200000000"))
	var de *enc.DecodeError
	if !errors.As(err, &de) || de.Field != "has_tag" || de.Offset != 0 {
		t.Fatalf("err %v, want has_tag at 0", err)
	}
	_, err = opreg.DecodeSliceParams(unhex(t, "0000"))
	if !errors.As(err, &de) || de.Field != "offset" {
		t.Fatalf("err %v, want offset", err)
	}
}

func TestEncodeParamsRejectsWrongType(t *testing.T) {
	for _, id := range opreg.Kernel().IDs() {
		if _, err := kernelOp(t, id).EncodeParams(struct{}{}); !errors.Is(err, opreg.ErrParams) {
			t.Errorf("%s: EncodeParams(struct{}{}) err %v", id, err)
		}
	}
	if _, err := opreg.EncodeConstParams(opreg.ConstParams{Bytes: make([]byte, opreg.MaxConstBytes+1)}); !errors.Is(err, opreg.ErrParams) {
		t.Errorf("oversized const encoded: %v", err)
	}
}

func run(t *testing.T, id opreg.OperationID, params []byte, global *asl.Artifact, inputs ...asl.Artifact) ([]asl.Artifact, *opreg.OpError) {
	t.Helper()
	op := kernelOp(t, id)
	v, err := op.DecodeParams(params)
	if err != nil {
		t.Fatal(err)
	}
	return op.Run(opreg.Call{Inputs: inputs, Params: v, Global: global})
}

func TestKernelRun(t *testing.T) {
	hello := asl.Tagged(7, []byte("hello"))
	world := asl.Untagged([]byte(" world"))
	global := asl.Tagged(0x99, []byte("cfg"))
	slice := func(off, n uint64) []byte { return opreg.EncodeSliceParams(opreg.SliceParams{Offset: off, Length: n}) }
	constP, _ := opreg.EncodeConstParams(opreg.ConstParams{HasTag: true, Tag: 0x42, Bytes: []byte("x")})
	tests := []struct {
		name   string
		op     opreg.OperationID
		params []byte
		global *asl.Artifact
		inputs []asl.Artifact
		want   asl.Artifact
		code   uint32
	}{
		{"const", opreg.OpConst, constP, nil, nil, asl.Tagged(0x42, []byte("x")), 0},
		{"concat two", opreg.OpConcat, nil, nil, []asl.Artifact{hello, world}, asl.Untagged([]byte("hello world")), 0},
		{"concat one drops tag", opreg.OpConcat, nil, nil, []asl.Artifact{hello}, asl.Untagged([]byte("hello")), 0},
		{"concat empties", opreg.OpConcat, nil, nil, []asl.Artifact{{}, {}}, asl.Untagged([]byte{}), 0},
		{"slice", opreg.OpSlice, slice(1, 3), nil, []asl.Artifact{hello}, asl.Untagged([]byte("ell")), 0},
		{"slice whole", opreg.OpSlice, slice(0, 5), nil, []asl.Artifact{hello}, asl.Untagged([]byte("hello")), 0},
		{"slice empty at end", opreg.OpSlice, slice(5, 0), nil, []asl.Artifact{hello}, asl.Untagged([]byte{}), 0},
		{"slice past end", opreg.OpSlice, slice(3, 3), nil, []asl.Artifact{hello}, asl.Artifact{}, opreg.StatusSliceOutOfRange},
		{"slice offset past end", opreg.OpSlice, slice(6, 0), nil, []asl.Artifact{hello}, asl.Artifact{}, opreg.StatusSliceOutOfRange},
		{"slice overflow", opreg.OpSlice, slice(math.MaxUint64, 2), nil, []asl.Artifact{hello}, asl.Artifact{}, opreg.StatusSliceOutOfRange},
		{"hash", opreg.OpHash, nil, nil, []asl.Artifact{hello}, asl.Untagged(unhex(t, "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824")), 0},
		{"params keeps tag", opreg.OpParams, nil, &global, nil, global, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.params == nil {
				tt.params = []byte{}
			}
			outs, oerr := run(t, tt.op, tt.params, tt.global, tt.inputs...)
			if tt.code != 0 {
				if oerr == nil || oerr.StatusCode != tt.code || len(outs) != 0 {
					t.Fatalf("got %v, %v; want status 0x%08x", outs, oerr, tt.code)
				}
				if len(oerr.Diagnostics) != 1 || oerr.Diagnostics[0].Code != tt.code {
					t.Fatalf("diagnostics %v", oerr.Diagnostics)
				}
				return
			}
			if oerr != nil {
				t.Fatal(oerr)
			}
			if len(outs) != 1 || !bytes.Equal(outs[0].Bytes, tt.want.Bytes) || outs[0].HasTag != tt.want.HasTag || outs[0].Tag != tt.want.Tag {
				t.Fatalf("outputs %+v, want %+v", outs, tt.want)
			}
		})
	}
}

func TestSliceDiagnostic(t *testing.T) {
	_, oerr := run(t, opreg.OpSlice, opreg.EncodeSliceParams(opreg.SliceParams{Offset: 3, Length: 3}), nil, asl.Untagged([]byte("hello")))
	if got := string(oerr.Diagnostics[0].Message); got != "slice offset 3 + length 3 exceeds input length 5" {
		t.Fatalf("message %q", got)
	}
}

func userOp(name string, version uint32) opreg.Operation {
	return opreg.Operation{
		ID:           opreg.OperationID{Name: name, Version: version},
		MinInputs:    1,
		MaxInputs:    2,
		DecodeParams: func(b []byte) (any, error) { return string(b), nil },
		EncodeParams: func(v any) ([]byte, error) { return []byte(v.(string)), nil },
		Run: func(c opreg.Call) ([]asl.Artifact, *opreg.OpError) {
			return []asl.Artifact{asl.Untagged(append([]byte(c.Params.(string)), c.Inputs[0].Bytes...))}, nil
		},
	}
}

func TestRegistryExtend(t *testing.T) {
	k := opreg.Kernel()
	r, err := k.Extend(userOp("acme.prefix", 1), userOp("acme.prefix", 2))
	if err != nil {
		t.Fatal(err)
	}
	if r.Len() != 7 || k.Len() != 5 {
		t.Fatalf("len %d (kernel %d)", r.Len(), k.Len())
	}
	if _, ok := k.Lookup(opreg.OperationID{Name: "acme.prefix", Version: 1}); ok {
		t.Fatal("Extend modified the kernel registry")
	}
	if op, ok := r.Lookup(opreg.OperationID{Name: "acme.prefix", Version: 2}); !ok || op.ArityString() != "1 to 2" {
		t.Fatalf("lookup %v %v", op, ok)
	}
	if _, ok := r.Lookup(opreg.OpConst); !ok {
		t.Fatal("extended registry lost the kernel")
	}

	bad := func(mod func(*opreg.Operation)) opreg.Operation {
		op := userOp("acme.x", 1)
		mod(&op)
		return op
	}
	tests := []struct {
		name string
		ops  []opreg.Operation
		want error
	}{
		{"duplicate of existing", []opreg.Operation{userOp("acme.prefix", 1)}, opreg.ErrDuplicate},
		{"duplicate within call", []opreg.Operation{userOp("acme.y", 1), userOp("acme.y", 1)}, opreg.ErrDuplicate},
		{"reserved prefix", []opreg.Operation{userOp("pel.bytes.const", 2)}, opreg.ErrInvalidOperation},
		{"empty name", []opreg.Operation{userOp("", 1)}, opreg.ErrInvalidOperation},
		{"long name", []opreg.Operation{userOp(string(make([]byte, 256)), 1)}, opreg.ErrInvalidOperation},
		{"bad utf8", []opreg.Operation{userOp("acme.\xff", 1)}, opreg.ErrInvalidOperation},
		{"nil run", []opreg.Operation{bad(func(o *opreg.Operation) { o.Run = nil })}, opreg.ErrInvalidOperation},
		{"nil decode", []opreg.Operation{bad(func(o *opreg.Operation) { o.DecodeParams = nil })}, opreg.ErrInvalidOperation},
		{"half json", []opreg.Operation{bad(func(o *opreg.Operation) { o.ParamsToJSON = func(any) ([]byte, error) { return nil, nil } })}, opreg.ErrInvalidOperation},
		{"negative min", []opreg.Operation{bad(func(o *opreg.Operation) { o.MinInputs = -1 })}, opreg.ErrInvalidOperation},
		{"max below min", []opreg.Operation{bad(func(o *opreg.Operation) { o.MaxInputs = 0 })}, opreg.ErrInvalidOperation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := r.Extend(tt.ops...)
			if !errors.Is(err, tt.want) || got != nil {
				t.Fatalf("Extend = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	if _, err := opreg.NewRegistry(userOp("acme.z", 1)); err != nil {
		t.Fatal(err)
	}
	var nilReg *opreg.Registry
	if _, ok := nilReg.Lookup(opreg.OpConst); ok || nilReg.Len() != 0 || nilReg.IDs() != nil {
		t.Fatal("nil registry is not empty")
	}
}

func TestRegistryConcurrent(t *testing.T) {
	base := opreg.Kernel()
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r, err := base.Extend(userOp("acme.c", uint32(i)))
			if err != nil {
				t.Error(err)
				return
			}
			for j := 0; j < 100; j++ {
				if _, ok := r.Lookup(opreg.OperationID{Name: "acme.c", Version: uint32(i)}); !ok {
					t.Error("lost op")
				}
				base.Lookup(opreg.OpSlice)
			}
		}(i)
	}
	wg.Wait()
	if base.Len() != 5 {
		t.Fatal("kernel changed")
	}
}

func TestParamsJSON(t *testing.T) {
	tests := []struct {
		op      opreg.OperationID
		json    string
		ok      bool
		canon   string // ParamsToJSON of the decoded value; "" means omitted
		encoded string
	}{
		{opreg.OpConst, `{"text":"hello"}`, true, `{"text":"hello"}`, "000000000568656c6c6f"},
		{opreg.OpConst, `{"hex":"68656c6c6f"}`, true, `{"text":"hello"}`, "000000000568656c6c6f"},
		{opreg.OpConst, `{"hex":"ff00","type_tag":"0x42"}`, true, `{"hex":"ff00","type_tag":"0x00000042"}`, "010000004200000002ff00"},
		{opreg.OpConst, `{"text":"<&>","type_tag":66}`, true, `{"text":"<&>","type_tag":"0x00000042"}`, "0100000042000000033c263e"},
		{opreg.OpConst, `{"text":"a","hex":"61"}`, false, "", ""},
		{opreg.OpConst, `{}`, false, "", ""},
		{opreg.OpConst, `{"text":"a","extra":1}`, false, "", ""},
		{opreg.OpConst, `{"text":"a","type_tag":"0x123456789"}`, false, "", ""},
		{opreg.OpConst, `{"text":"a","type_tag":-1}`, false, "", ""},
		{opreg.OpConst, `{"hex":"zz"}`, false, "", ""},
		{opreg.OpSlice, `{"offset":1,"length":3}`, true, `{"offset":1,"length":3}`, "00000000000000010000000000000003"},
		{opreg.OpSlice, `{"offset":18446744073709551615,"length":0}`, true, `{"offset":18446744073709551615,"length":0}`, "ffffffffffffffff0000000000000000"},
		{opreg.OpSlice, `{"offset":1}`, false, "", ""},
		{opreg.OpSlice, `{"offset":1.5,"length":3}`, false, "", ""},
		{opreg.OpSlice, `{"offset":1,"length":3} {}`, false, "", ""},
		{opreg.OpSlice, `{"offset":1,"length":3}}`, false, "", ""},
		{opreg.OpConst, `{"text":"a"}]`, false, "", ""},
		{opreg.OpConst, "{\"text\":\"a\"} \n\t", true, `{"text":"a"}`, "000000000161"},
		{opreg.OpConcat, `null`, true, "", ""},
		{opreg.OpConcat, `{}`, true, "", ""},
		{opreg.OpHash, `{"hash":1}`, false, "", ""},
		{opreg.OpParams, `[]`, false, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.op.Name+" "+tt.json, func(t *testing.T) {
			op := kernelOp(t, tt.op)
			v, err := op.ParamsFromJSON([]byte(tt.json))
			if !tt.ok {
				if err == nil {
					t.Fatalf("accepted: %#v", v)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := op.EncodeParams(v)
			if err != nil || hex.EncodeToString(b) != tt.encoded {
				t.Fatalf("encoded %x, %v; want %s", b, err, tt.encoded)
			}
			j, err := op.ParamsToJSON(v)
			if err != nil || string(j) != tt.canon {
				t.Fatalf("ParamsToJSON %s, %v; want %s", j, err, tt.canon)
			}
		})
	}
}

func FuzzDecodeConstParams(f *testing.F) {
	f.Add(unhex(f, "000000000568656c6c6f"))
	f.Add(unhex(f, "01000000420000000161"))
	f.Add(unhex(f, "02"))
	f.Add(unhex(f, "00ffffffff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := opreg.DecodeConstParams(b)
		if err != nil {
			return
		}
		back, err := opreg.EncodeConstParams(p)
		if err != nil || !bytes.Equal(back, b) {
			t.Fatalf("round trip %x -> %x, %v", b, back, err)
		}
	})
}

func FuzzDecodeSliceParams(f *testing.F) {
	f.Add(unhex(f, "00000000000000010000000000000003"))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := opreg.DecodeSliceParams(b)
		if err != nil {
			if len(b) == 16 {
				t.Fatal("rejected 16 bytes")
			}
			return
		}
		if back := opreg.EncodeSliceParams(p); !bytes.Equal(back, b) {
			t.Fatalf("round trip %x -> %x", b, back)
		}
	})
}
