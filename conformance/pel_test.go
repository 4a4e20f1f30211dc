package conformance_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/amduat/amduat/conformance"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
)

// loadKinds returns every vector of the given kinds, decoded generically
// (from the files loaded once, FrozenVectors).
func loadKinds(t *testing.T, kinds ...string) map[string][]map[string]any {
	t.Helper()
	files, err := conformance.FrozenVectors()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, k := range kinds {
		want[k] = true
	}
	out := map[string][]map[string]any{}
	for _, f := range files {
		for _, v := range f.Vectors {
			if !want[v.Kind] {
				continue
			}
			var m map[string]any
			raw, _ := json.Marshal(v)
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			out[v.Kind] = append(out[v.Kind], m)
		}
	}
	return out
}

func field(v map[string]any, path ...string) any {
	var cur any = v
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

// Every PEL, trace and surface kind has vectors; every decode kind has both
// accepted and rejected ones.
func TestPELVectorCoverage(t *testing.T) {
	t.Parallel()
	kinds := []string{
		conformance.KindProgramEncode, conformance.KindProgramDecode, conformance.KindCanonicalOrder, conformance.KindExecDAG,
		conformance.KindResultValueEncode, conformance.KindResultValueDecode, conformance.KindDescriptorEncode,
		conformance.KindDescriptorDecode, conformance.KindSchemeRefDAG1, conformance.KindTraceEncode, conformance.KindTraceDecode,
		conformance.KindResultEncode, conformance.KindResultDecode, conformance.KindSurfaceRun,
	}
	byKind := loadKinds(t, kinds...)
	for _, k := range kinds {
		vs := byKind[k]
		if len(vs) == 0 {
			t.Errorf("kind %s has no vectors", k)
		}
		if strings.HasSuffix(k, "_decode") {
			rejects := 0
			for _, v := range vs {
				if field(v, "expect", "reject") != nil {
					rejects++
				}
			}
			if rejects == 0 || rejects == len(vs) {
				t.Errorf("kind %s: %d vectors, %d rejections; want both", k, len(vs), rejects)
			}
		}
	}
}

// The Exec_DAG vectors reach every status and every diagnostic Exec_DAG can
// report with the kernel registry (0x0011 needs an operation that breaks
// its contract, which the kernel has none of), and every evaluation path.
func TestExecVectorsCoverEveryDiagnostic(t *testing.T) {
	t.Parallel()
	statuses := map[string]int{}
	first := map[uint32]int{}
	for _, v := range loadKinds(t, conformance.KindExecDAG)[conformance.KindExecDAG] {
		statuses[field(v, "expect", "status").(string)]++
		if ds, _ := field(v, "expect", "diagnostics").([]any); len(ds) > 0 {
			first[uint32(ds[0].(map[string]any)["code"].(float64))]++
		}
	}
	for _, s := range []string{"OK", "INVALID_PROGRAM", "INVALID_INPUTS", "RUNTIME_FAILED"} {
		if statuses[s] == 0 {
			t.Errorf("no exec_dag vector with status %s", s)
		}
	}
	for code := pel.DiagProgramTypeTag; code <= pel.DiagLimitOutputBytes; code++ {
		if code == pel.DiagOperationContract {
			continue
		}
		if first[code] == 0 {
			t.Errorf("no exec_dag vector reports diagnostic 0x%04x", code)
		}
	}
	if statuses["SCHEME_UNSUPPORTED"] != 0 {
		t.Error("an exec_dag vector claims SCHEME_UNSUPPORTED, which Exec_DAG never produces")
	}
}

// The surface vectors cover every store failure class in every phase where
// it can arise, plus every status.
func TestSurfaceVectorsCoverStoreFailures(t *testing.T) {
	t.Parallel()
	seen := map[string]int{}
	statuses := map[string]int{}
	damaged, pebble := 0, 0
	for _, v := range loadKinds(t, conformance.KindSurfaceRun)[conformance.KindSurfaceRun] {
		statuses[field(v, "expect", "status").(string)]++
		if f, ok := field(v, "expect", "store_failure").(map[string]any); ok {
			seen[f["phase"].(string)+" "+f["error"].(string)]++
		}
		if ds, _ := field(v, "input", "damaged").([]any); len(ds) > 0 {
			damaged++
		} else {
			pebble++
		}
	}
	for _, want := range []string{
		"program ERR_NOT_FOUND", "program ERR_INTEGRITY", "program ERR_UNSUPPORTED",
		"input ERR_NOT_FOUND", "input ERR_INTEGRITY", "input ERR_UNSUPPORTED",
		"params ERR_NOT_FOUND", "params ERR_INTEGRITY",
	} {
		if seen[want] == 0 {
			t.Errorf("no surface_run vector with store failure %s", want)
		}
	}
	for _, s := range []string{"OK", "SCHEME_UNSUPPORTED", "INVALID_PROGRAM", "INVALID_INPUTS", "RUNTIME_FAILED"} {
		if statuses[s] == 0 {
			t.Errorf("no surface_run vector with status %s", s)
		}
	}
	if damaged < 3 || pebble < 10 {
		t.Errorf("%d damaged and %d undamaged surface vectors", damaged, pebble)
	}
}

func unhexT(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// refOf derives a SHA-256 reference with the standard library only:
// 0001 || SHA-256(has_tag u8 [tag u32] || len u64 || bytes).
func refOf(tag *uint32, b []byte) string {
	var ab []byte
	if tag == nil {
		ab = append(ab, 0)
	} else {
		ab = binary.BigEndian.AppendUint32(append(ab, 1), *tag)
	}
	ab = binary.BigEndian.AppendUint64(ab, uint64(len(b)))
	s := sha256.Sum256(append(ab, b...))
	return fmt.Sprintf("0001%x", s)
}

// Every program_encode vector is re-encoded here from its JSON with
// encoding/binary alone, following SPECS.md §9.1, and its reference derived
// with crypto/sha256: the frozen bytes do not depend on package pel.
func TestProgramVectorsIndependently(t *testing.T) {
	t.Parallel()
	vs := loadKinds(t, conformance.KindProgramEncode)[conformance.KindProgramEncode]
	if len(vs) < 10 {
		t.Fatalf("only %d program_encode vectors", len(vs))
	}
	u32 := func(b []byte, v float64) []byte { return binary.BigEndian.AppendUint32(b, uint32(v)) }
	for _, v := range vs {
		p := field(v, "input", "program").(map[string]any)
		var b []byte
		nodes := p["nodes"].([]any)
		b = u32(b, float64(len(nodes)))
		for _, n := range nodes {
			n := n.(map[string]any)
			b = u32(b, n["id"].(float64))
			name := n["op"].(string)
			b = append(u32(b, float64(len(name))), name...)
			b = u32(b, n["version"].(float64))
			ins := n["inputs"].([]any)
			b = u32(b, float64(len(ins)))
			for _, in := range ins {
				in := in.(map[string]any)
				if i, ok := in["input"]; ok {
					b = u32(append(b, 0), i.(float64))
				} else {
					b = u32(u32(append(b, 1), in["node"].(float64)), in["output"].(float64))
				}
			}
			params := unhexT(t, n["params"].(string))
			b = append(u32(b, float64(len(params))), params...)
		}
		roots := p["roots"].([]any)
		b = u32(b, float64(len(roots)))
		for _, r := range roots {
			r := r.(map[string]any)
			b = u32(u32(b, r["node"].(float64)), r["output"].(float64))
		}
		if got, want := hex.EncodeToString(b), field(v, "expect", "program_bytes"); got != want {
			t.Errorf("%s: independent ProgramBytes %s, vector %s", v["id"], got, want)
		}
		tag := uint32(0x101)
		if got, want := refOf(&tag, b), field(v, "expect", "reference"); got != want {
			t.Errorf("%s: independent reference %s, vector %s", v["id"], got, want)
		}
	}
}

// In every surface vector, the result, trace and output references are the
// SHA-256 (or BLAKE3, checked by the runner) references of the bytes the
// vector gives, computed here with crypto/sha256 alone; and the result
// bytes name the output references in the order the vector lists them.
func TestSurfaceVectorsSelfConsistent(t *testing.T) {
	t.Parallel()
	n := 0
	for _, v := range loadKinds(t, conformance.KindSurfaceRun)[conformance.KindSurfaceRun] {
		if field(v, "input", "hash_id").(float64) != 1 {
			continue
		}
		n++
		resTag, trTag := uint32(0x103), uint32(0x102)
		rb := unhexT(t, field(v, "expect", "result_bytes").(string))
		tb := unhexT(t, field(v, "expect", "trace_bytes").(string))
		if got := refOf(&resTag, rb); got != field(v, "expect", "result_ref") {
			t.Errorf("%s: result bytes hash to %s, vector says %v", v["id"], got, field(v, "expect", "result_ref"))
		}
		if got := refOf(&trTag, tb); got != field(v, "expect", "trace_ref") {
			t.Errorf("%s: trace bytes hash to %s, vector says %v", v["id"], got, field(v, "expect", "trace_ref"))
		}
		outs, _ := field(v, "expect", "outputs").([]any)
		refs, _ := field(v, "expect", "output_refs").([]any)
		if len(outs) != len(refs) {
			t.Fatalf("%s: %d outputs, %d output_refs", v["id"], len(outs), len(refs))
		}
		for i, o := range outs {
			o := o.(map[string]any)
			var tag *uint32
			if tv, ok := o["type_tag"].(float64); ok {
				tt := uint32(tv)
				tag = &tt
			}
			if got := refOf(tag, unhexT(t, o["bytes"].(string))); got != refs[i] {
				t.Errorf("%s: output %d hashes to %s, vector says %v", v["id"], i, got, refs[i])
			}
			if !bytes.Contains(rb, unhexT(t, refs[i].(string))) {
				t.Errorf("%s: result bytes do not name output %d", v["id"], i)
			}
		}
		// The trace names the result (exec_result_ref) as an EncodedRef.
		if !bytes.Contains(tb, append([]byte{0, 0, 0, 34}, unhexT(t, field(v, "expect", "result_ref").(string))...)) {
			t.Errorf("%s: trace bytes do not name the result", v["id"])
		}
		r, err := surf.DecodeResult(rb)
		if err != nil {
			t.Errorf("%s: result bytes: %v", v["id"], err)
		} else if r.Value.Status.String() != field(v, "expect", "status") {
			t.Errorf("%s: result bytes say %s, vector %v", v["id"], r.Value.Status, field(v, "expect", "status"))
		}
	}
	if n < 10 {
		t.Fatalf("only %d SHA-256 surface vectors", n)
	}
}
