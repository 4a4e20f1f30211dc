package pel_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/enc"
	"github.com/amduat/amduat/pel"
)

func TestStatusAndKindNames(t *testing.T) {
	t.Parallel()
	statuses := map[pel.ExecutionStatus]string{0: "OK", 1: "SCHEME_UNSUPPORTED", 2: "INVALID_PROGRAM", 3: "INVALID_INPUTS", 4: "RUNTIME_FAILED", 5: "STATUS_5"}
	for s, name := range statuses {
		if s.String() != name {
			t.Errorf("status %d = %q, want %q", s, s, name)
		}
	}
	kinds := map[pel.ExecutionErrorKind]string{0: "NONE", 1: "SCHEME", 2: "PROGRAM", 3: "INPUTS", 4: "RUNTIME", 9: "KIND_9"}
	for k, name := range kinds {
		if k.String() != name {
			t.Errorf("kind %d = %q, want %q", k, k, name)
		}
	}
}

func TestCheckStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s    pel.ExecutionStatus
		k    pel.ExecutionErrorKind
		code uint32
		ok   bool
	}{
		{pel.StatusOK, pel.KindNone, 0, true},
		{pel.StatusOK, pel.KindNone, 1, false},
		{pel.StatusOK, pel.KindProgram, 0, false},
		{pel.StatusSchemeUnsupported, pel.KindScheme, 1, true},
		{pel.StatusSchemeUnsupported, pel.KindScheme, 0, false},
		{pel.StatusInvalidProgram, pel.KindProgram, 2, true},
		{pel.StatusInvalidProgram, pel.KindProgram, 3, false},
		{pel.StatusInvalidProgram, pel.KindInputs, 2, false},
		{pel.StatusInvalidInputs, pel.KindInputs, 3, true},
		{pel.StatusInvalidInputs, pel.KindInputs, 2, false},
		{pel.StatusRuntimeFailed, pel.KindRuntime, 1, true},
		{pel.StatusRuntimeFailed, pel.KindRuntime, 4, true},
		{pel.StatusRuntimeFailed, pel.KindRuntime, 0xffffffff, true},
		{pel.StatusRuntimeFailed, pel.KindRuntime, 0, false},
		{pel.StatusRuntimeFailed, pel.KindRuntime, 2, false},
		{pel.StatusRuntimeFailed, pel.KindRuntime, 3, false},
		{pel.StatusRuntimeFailed, pel.KindNone, 7, false},
		{5, 5, 5, false},
	}
	for _, tt := range tests {
		if err := pel.CheckStatus(tt.s, tt.k, tt.code); (err == nil) != tt.ok {
			t.Errorf("CheckStatus(%s, %s, %d) = %v, want ok=%v", tt.s, tt.k, tt.code, err, tt.ok)
		}
	}
}

func sampleResult() pel.ExecutionResultValue {
	return pel.ExecutionResultValue{
		PEL1Version: 1,
		Status:      pel.StatusRuntimeFailed,
		SchemeRef:   pel.SchemeRefDAG1,
		Summary:     pel.ExecutionErrorSummary{Kind: pel.KindRuntime, StatusCode: 0x00030001},
		Diagnostics: []pel.DiagnosticEntry{{Code: 0x10, Message: []byte("node 1")}, {Code: 0x00030001, Message: []byte{}}},
	}
}

func TestResultValueGolden(t *testing.T) {
	t.Parallel()
	ok := pel.ExecutionResultValue{PEL1Version: 1, Status: pel.StatusOK, SchemeRef: pel.SchemeRefDAG1}
	var out bytes.Buffer
	for _, v := range []pel.ExecutionResultValue{ok, sampleResult()} {
		b, err := pel.EncodeResultValue(v)
		if err != nil {
			t.Fatal(err)
		}
		back, err := pel.DecodeResultValue(b)
		if err != nil {
			t.Fatal(err)
		}
		if b2, _ := pel.EncodeResultValue(back); !bytes.Equal(b, b2) || back.Status != v.Status || len(back.Diagnostics) != len(v.Diagnostics) {
			t.Fatalf("round trip %+v -> %+v", v, back)
		}
		out.WriteString(hex.EncodeToString(b) + "\n")
	}
	checkGolden(t, "result_values.txt", out.Bytes())
}

func TestEncodeResultValueRejectsInvalid(t *testing.T) {
	t.Parallel()
	for name, mod := range map[string]func(*pel.ExecutionResultValue){
		"version 2":        func(v *pel.ExecutionResultValue) { v.PEL1Version = 2 },
		"zero scheme ref":  func(v *pel.ExecutionResultValue) { v.SchemeRef = asl.Reference{} },
		"kind mismatch":    func(v *pel.ExecutionResultValue) { v.Summary.Kind = pel.KindProgram },
		"runtime code 2":   func(v *pel.ExecutionResultValue) { v.Summary.StatusCode = 2 },
		"undefined status": func(v *pel.ExecutionResultValue) { v.Status = 9 },
	} {
		v := sampleResult()
		mod(&v)
		if _, err := pel.EncodeResultValue(v); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
}

func TestDecodeResultValueRejects(t *testing.T) {
	t.Parallel()
	good, _ := pel.EncodeResultValue(sampleResult())
	// Layout of good: 0..2 version, 2 status, 3..7 ref_len, 7..41 ref,
	// 41 kind, 42..46 code, 46..50 diag count, then entries.
	set := func(off int, b ...byte) []byte {
		c := bytes.Clone(good)
		copy(c[off:], b)
		return c
	}
	tests := []struct {
		name   string
		b      []byte
		field  string
		offset int
	}{
		{"empty", nil, "pel1_version", 0},
		{"version 0", set(0, 0, 0), "pel1_version", 0},
		{"version 2", set(0, 0, 2), "pel1_version", 0},
		{"status 5", set(2, 5), "status", 2},
		{"ref_len 1", set(3, 0, 0, 0, 1), "scheme_ref.ref_len", 3},
		{"ref_len past end", set(3, 0xff, 0, 0, 0), "scheme_ref.ref_len", 3},
		{"ref hash id 0", set(7, 0, 0), "scheme_ref.hash_id", 7},
		{"kind mismatch", set(41, 2), "summary.kind", 41},
		{"kind undefined", set(41, 7), "summary.kind", 41},
		{"runtime code 0", set(42, 0, 0, 0, 0), "summary.status_code", 42},
		{"runtime code 3", set(42, 0, 0, 0, 3), "summary.status_code", 42},
		{"diag count past end", set(46, 0, 0, 0, 9), "diagnostics.count", 46},
		{"message past end", set(54, 0, 0, 1, 0), "diagnostics.message", 54},
		{"truncated", good[:len(good)-1], "diagnostics.message length", 68},
		{"trailing", append(bytes.Clone(good), 0), "end of input", len(good)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := pel.DecodeResultValue(tt.b)
			var de *enc.DecodeError
			if !errors.As(err, &de) || de.Field != tt.field || de.Offset != tt.offset {
				t.Fatalf("err %v; want field %q at %d", err, tt.field, tt.offset)
			}
		})
	}
	ok := pel.ExecutionResultValue{PEL1Version: 1, Status: pel.StatusInvalidProgram, SchemeRef: pel.SchemeRefDAG1, Summary: pel.ExecutionErrorSummary{Kind: pel.KindProgram, StatusCode: 2}}
	b, _ := pel.EncodeResultValue(ok)
	b[len(b)-5] = 3 // status_code 2 -> 3 for INVALID_PROGRAM
	if _, err := pel.DecodeResultValue(b); err == nil {
		t.Fatal("INVALID_PROGRAM with status_code 3 accepted")
	}
}

func TestReadResultValueEmbedded(t *testing.T) {
	t.Parallel()
	v, _ := pel.EncodeResultValue(sampleResult())
	b := append(append([]byte{0xaa}, v...), 0xbb)
	r := enc.NewReader(b)
	r.U8("prefix")
	got, err := pel.ReadResultValue(r)
	if err != nil || got.Summary.StatusCode != 0x00030001 || r.U8("suffix") != 0xbb || r.Done() != nil {
		t.Fatalf("%+v %v", got, err)
	}
}

func FuzzDecodeResultValue(f *testing.F) {
	good, _ := pel.EncodeResultValue(sampleResult())
	f.Add(good)
	ok, _ := pel.EncodeResultValue(pel.ExecutionResultValue{PEL1Version: 1, SchemeRef: pel.SchemeRefDAG1})
	f.Add(ok)
	f.Add([]byte{0, 1, 4, 0, 0, 0, 2, 0x80, 0x01, 4, 0, 0, 0, 9, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := pel.DecodeResultValue(b)
		if err != nil {
			return
		}
		if err := v.Validate(); err != nil {
			t.Fatalf("decoded an invalid value: %v", err)
		}
		back, err := pel.EncodeResultValue(v)
		if err != nil || !bytes.Equal(back, b) {
			t.Fatalf("encode(decode(b)) = %x, %v; want %x", back, err, b)
		}
	})
}
