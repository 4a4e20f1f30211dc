package conformance_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/conformance"
	"github.com/amduat/amduat/internal/longtest"
	"github.com/amduat/amduat/vectors"
	"github.com/zeebo/blake3"
)

const vectorDir = "../vectors"

func TestVectors(t *testing.T) {
	t.Parallel()
	var results []conformance.Result
	sum, err := conformance.RunDir(context.Background(), vectorDir, func(r conformance.Result) {
		results = append(results, r)
		if !r.Pass {
			t.Errorf("%s (%s): %s", r.ID, r.File, r.Reason)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Failed != 0 || sum.Passed != len(results) || sum.Passed == 0 {
		t.Fatalf("summary %s over %d results", sum, len(results))
	}
	t.Logf("%d files: %s", sum.Files, sum)
}

func TestEmbeddedVectorsMatchDirectory(t *testing.T) {
	t.Parallel()
	onDisk, err := filepath.Glob(filepath.Join(vectorDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	embedded, err := fs.Glob(vectors.FS(), "*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(onDisk) != len(embedded) {
		t.Fatalf("%d files on disk, %d embedded", len(onDisk), len(embedded))
	}
	for _, p := range onDisk {
		want, _ := os.ReadFile(p)
		got, err := fs.ReadFile(vectors.FS(), filepath.Base(p))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("embedded %s differs from the file on disk (%v)", filepath.Base(p), err)
		}
	}
}

// costlyCategories are the categories whose generation costs seconds
// under -race: pel.exec executes its two 1 MiB constants (3.2 CPU-s),
// wasm.run compiles its modules (1.4 CPU-s); every other category takes
// 0.6 CPU-s together.
var costlyCategories = map[string]bool{"pel.exec": true, "wasm.run": true}

// The checked-in files are frozen: regenerating from the case tables with
// the current implementation must give the very same bytes. A failure means
// either the implementation's bytes changed (a spec change: regenerate
// deliberately with `amduat conformance generate vectors` and review) or the
// case tables changed without regenerating.
//
// Every category is generated once, through Generate into a directory
// (which writes GenerateFile's bytes), and the files written are compared
// with the frozen ones: generating is as costly as running the vectors, so
// the two are not done twice. The files written are loadable and pass:
// when they equal the frozen files, TestVectors loads and runs those very
// bytes; when they differ they are parsed and run here too.
//
// The default run regenerates every category but costlyCategories;
// AMDUAT_LONG=1 (internal/longtest) regenerates those too. The default run
// of cmd/amduat's TestConformanceRun regenerates every category through
// `amduat conformance generate` and compares it with the frozen files.
func TestGeneratorsReproduceFrozenFiles(t *testing.T) {
	t.Parallel()
	all := conformance.Categories()
	if len(all) == 0 {
		t.Fatal("no generators registered")
	}
	var cats []string
	for _, c := range all {
		if !costlyCategories[c] || longtest.Enabled() {
			cats = append(cats, c)
		}
	}
	if len(cats) != len(all) {
		t.Logf("%d of %d categories regenerated (%s=1 regenerates all)", len(cats), len(all), longtest.Env)
	}
	dir := t.TempDir()
	paths, err := conformance.Generate(dir, cats...)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != len(cats) {
		t.Fatalf("wrote %d files for %d categories", len(paths), len(cats))
	}
	differ := false
	for i, c := range cats {
		if filepath.Base(paths[i]) != c+".json" {
			t.Fatalf("file %d is %s, want %s.json", i, paths[i], c)
		}
		got, err := os.ReadFile(paths[i])
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		want, err := os.ReadFile(filepath.Join(vectorDir, c+".json"))
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		if !bytes.Equal(got, want) {
			differ = true
			t.Errorf("%s: generated file differs from the frozen %s.json", c, c)
			if _, err := conformance.ParseFile(got); err != nil {
				t.Errorf("%s: generated file does not parse: %v", c, err)
			}
		}
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".vectors-*"))
	if len(leftovers) != 0 {
		t.Fatalf("temporary files left: %v", leftovers)
	}
	if differ {
		if sum, err := conformance.RunDir(context.Background(), dir, nil); err != nil || sum.Failed != 0 {
			t.Fatalf("generated files: %s, %v", sum, err)
		}
	}
}

// Generate writes one category on request, GenerateFile's bytes, and
// refuses an unknown category before writing anything.
func TestGenerateWritesLoadableFiles(t *testing.T) {
	t.Parallel()
	one := t.TempDir()
	paths, err := conformance.Generate(one, "asl.text")
	if err != nil || len(paths) != 1 || filepath.Base(paths[0]) != "asl.text.json" {
		t.Fatalf("Generate(asl.text) = %v, %v", paths, err)
	}
	got, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	want, err := conformance.GenerateFile("asl.text")
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Generate(asl.text) wrote other bytes than GenerateFile (%v)", err)
	}
	if sum, err := conformance.RunDir(context.Background(), one, nil); err != nil || sum.Failed != 0 || sum.Passed == 0 {
		t.Fatalf("generated asl.text: %s, %v", sum, err)
	}
	none := filepath.Join(t.TempDir(), "none")
	if _, err := conformance.Generate(none, "asl.text", "no.such"); !errors.Is(err, conformance.ErrUnknownCategory) {
		t.Fatalf("unknown category: err = %v", err)
	}
	if _, err := os.Stat(none); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("Generate wrote something before rejecting an unknown category")
	}
}

type deriveVector struct {
	Input struct {
		HashID  uint16  `json:"hash_id"`
		TypeTag *uint32 `json:"type_tag"`
		Bytes   string  `json:"bytes"`
	} `json:"input"`
	Expect struct {
		ArtifactBytes string `json:"artifact_bytes"`
		Reference     string `json:"reference"`
	} `json:"expect"`
}

// Recomputes every derivation vector with the standard library and the
// BLAKE3 package directly, without package asl: the frozen values are right
// independently of the implementation that produced them.
func TestDerivationVectorsIndependently(t *testing.T) {
	t.Parallel()
	files, err := conformance.FrozenVectors()
	if err != nil {
		t.Fatal(err)
	}
	n := map[uint16]int{}
	for _, f := range files {
		for _, v := range f.Vectors {
			if v.Kind != conformance.KindReferenceDerive {
				continue
			}
			var dv deriveVector
			raw, _ := json.Marshal(v)
			if err := json.Unmarshal(raw, &dv); err != nil {
				t.Fatal(err)
			}
			payload, _ := hex.DecodeString(dv.Input.Bytes)
			var ab []byte
			if dv.Input.TypeTag == nil {
				ab = append(ab, 0)
			} else {
				ab = binary.BigEndian.AppendUint32(append(ab, 1), *dv.Input.TypeTag)
			}
			ab = binary.BigEndian.AppendUint64(ab, uint64(len(payload)))
			ab = append(ab, payload...)
			if got := hex.EncodeToString(ab); got != dv.Expect.ArtifactBytes {
				t.Errorf("%s: artifact bytes %s, vector says %s", v.ID, got, dv.Expect.ArtifactBytes)
			}
			var digest []byte
			switch dv.Input.HashID {
			case 0x0001:
				s := sha256.Sum256(ab)
				digest = s[:]
			case 0x8001:
				s := blake3.Sum256(ab)
				digest = s[:]
			default:
				t.Fatalf("%s: unexpected hash id %#x", v.ID, dv.Input.HashID)
			}
			want := fmt.Sprintf("%04x%x", dv.Input.HashID, digest)
			if want != dv.Expect.Reference {
				t.Errorf("%s: reference %s, vector says %s", v.ID, want, dv.Expect.Reference)
			}
			n[dv.Input.HashID]++
		}
	}
	if n[1] < 5 || n[0x8001] < 5 {
		t.Fatalf("too few derivation vectors: %v", n)
	}
	// The BLAKE3 package itself against the official test vector for the
	// empty input (BLAKE3 reference implementation, test_vectors.json).
	if s := blake3.Sum256(nil); hex.EncodeToString(s[:]) != "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262" {
		t.Fatalf("blake3 of the empty input = %x", s)
	}
	// SPECS.md §5.1: printf '\0\0\0\0\0\0\0\0\0' | sha256sum
	if got := asl.MustDerive(asl.HashSHA256, asl.Untagged(nil)).String(); got != "00013e7077fd2f66d689e0cee6a7cf5b37bf2dca7c979af356d0a31cbc5c85605c7d" {
		t.Fatalf("empty artifact reference %s", got)
	}
}

// Every kind registered by this package is exercised, and every decoder
// kind has both accepted and rejected vectors.
func TestVectorCoverage(t *testing.T) {
	t.Parallel()
	files, err := conformance.FrozenVectors()
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	rejects := map[string]int{}
	for _, f := range files {
		for _, v := range f.Vectors {
			count[v.Kind]++
			if bytes.Contains(v.Expect, []byte(`"reject"`)) {
				rejects[v.Kind]++
			}
		}
	}
	for _, k := range []string{
		conformance.KindArtifactEncode, conformance.KindArtifactDecode, conformance.KindReferenceDecode,
		conformance.KindReferenceDerive, conformance.KindReferenceToText, conformance.KindReferenceFromText,
		conformance.KindEncodedRefEncode, conformance.KindEncodedRefDecode,
		conformance.KindOptionalEncodedRefEncode, conformance.KindOptionalEncodedRefDecode,
	} {
		if count[k] == 0 {
			t.Errorf("kind %s has no vectors", k)
		}
		if strings.HasSuffix(k, "_decode") || k == conformance.KindReferenceFromText {
			if rejects[k] == 0 || rejects[k] == count[k] {
				t.Errorf("kind %s: %d vectors of which %d rejections; want both kinds", k, count[k], rejects[k])
			}
		}
	}
}

// mutations returns copies of a JSON value in which exactly one leaf is
// changed. Reject fields without an offset are skipped: they are informative
// (SPECS.md §7) and no check can compare them.
func mutations(v any, skipField bool) []any {
	switch x := v.(type) {
	case map[string]any:
		var out []any
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		_, hasOffset := x["offset"]
		for _, k := range keys {
			if k == "field" && !hasOffset {
				continue
			}
			for _, m := range mutations(x[k], skipField) {
				c := make(map[string]any, len(x))
				for kk, vv := range x {
					c[kk] = vv
				}
				c[k] = m
				out = append(out, c)
			}
		}
		return out
	case string:
		if x == "" {
			return []any{"00"}
		}
		last := x[len(x)-1]
		repl := byte('0')
		if last == '0' {
			repl = '1'
		}
		return []any{x[:len(x)-1] + string(repl)}
	case float64:
		return []any{x + 1}
	case json.Number:
		// Changed in its last digit, not through a float64: integers
		// above 2^53 (u64 counts, i64 nanosecond times) would not change.
		last := x[len(x)-1]
		repl := byte('1')
		if last == '1' {
			repl = '2'
		}
		return []any{x[:len(x)-1] + json.Number(string(repl))}
	case bool:
		return []any{!x}
	case nil:
		return []any{float64(0)}
	}
	return nil
}

// leafPaths lists the JSON paths of the leaves of v, in sorted order: the
// shape of an expectation, array lengths included.
func leafPaths(v any, prefix string, out []string) []string {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = leafPaths(x[k], prefix+"."+k, out)
		}
	case []any:
		for i, e := range x {
			out = leafPaths(e, fmt.Sprintf("%s[%d]", prefix, i), out)
		}
	default:
		out = append(out, prefix)
	}
	return out
}

// Changing any single expected value makes the vector fail: the checks
// really compare every expectation. The default run alters every leaf of
// the first vector of each shape (kind and set of expected fields), so
// every field each check compares is altered; AMDUAT_LONG=1 alters every
// leaf of every vector (internal/longtest).
func TestChecksRejectAlteredExpectations(t *testing.T) {
	t.Parallel()
	files, err := conformance.FrozenVectors()
	if err != nil {
		t.Fatal(err)
	}
	all := longtest.Enabled()
	shapes := map[string]bool{}
	tried, vectorsTried := 0, 0
	for _, f := range files {
		for _, v := range f.Vectors {
			var exp any
			d := json.NewDecoder(bytes.NewReader(v.Expect))
			d.UseNumber()
			if err := d.Decode(&exp); err != nil {
				t.Fatal(err)
			}
			shape := v.Kind + " " + strings.Join(leafPaths(exp, "", nil), " ")
			if shapes[shape] && !all {
				continue
			}
			shapes[shape] = true
			vectorsTried++
			for _, m := range mutations(exp, false) {
				alt := v
				alt.Expect, _ = json.Marshal(m)
				file := conformance.File{Format: conformance.Format, Category: f.Category, Vectors: []conformance.Vector{alt}}
				data, _ := json.Marshal(file)
				sum, err := conformance.Run(context.Background(), fstest.MapFS{"x.json": {Data: data}}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if sum.Failed != 1 {
					t.Errorf("%s: altered expect %s still passes", v.ID, alt.Expect)
				}
				tried++
			}
		}
	}
	t.Logf("%d mutations of %d vectors (%d shapes; %s=1 alters every vector)", tried, vectorsTried, len(shapes), longtest.Env)
	if tried < 100 {
		t.Fatalf("only %d mutations tried", tried)
	}
}

func vectorFile(category string, vs ...string) []byte {
	return []byte(fmt.Sprintf(`{"format":"amduat-vectors/1","category":%q,"vectors":[%s]}`, category, strings.Join(vs, ",")))
}

func vec(id, kind, input, expect string) string {
	return fmt.Sprintf(`{"id":%q,"description":"d","spec":"§3.1","kind":%q,"input":%s,"expect":%s}`, id, kind, input, expect)
}

func TestLoadRejectsMalformedFiles(t *testing.T) {
	good := vec("c.one", "artifact_encode", `{"type_tag":null,"bytes":""}`, `{"artifact_bytes":"000000000000000000"}`)
	tests := []struct {
		name string
		fs   fstest.MapFS
		want string
	}{
		{"no files", fstest.MapFS{"readme.txt": {Data: []byte("x")}}, "no vector files"},
		{"not json", fstest.MapFS{"a.json": {Data: []byte("{")}}, "a.json"},
		{"wrong format", fstest.MapFS{"a.json": {Data: bytes.Replace(vectorFile("c", good), []byte("amduat-vectors/1"), []byte("amduat-vectors/2"), 1)}}, "format"},
		{"unknown member", fstest.MapFS{"a.json": {Data: []byte(`{"format":"amduat-vectors/1","category":"c","vectors":[],"extra":1}`)}}, "unknown field"},
		{"empty category", fstest.MapFS{"a.json": {Data: vectorFile("", good)}}, "category"},
		{"id outside category", fstest.MapFS{"a.json": {Data: vectorFile("d", good)}}, "does not start with"},
		{"empty kind", fstest.MapFS{"a.json": {Data: vectorFile("c", vec("c.x", "", `{}`, `{}`))}}, "kind is empty"},
		{"missing input", fstest.MapFS{"a.json": {Data: vectorFile("c", `{"id":"c.x","kind":"k","expect":{}}`)}}, "input and expect"},
		{"duplicate in file", fstest.MapFS{"a.json": {Data: vectorFile("c", good, good)}}, "duplicate id"},
		{"duplicate across files", fstest.MapFS{"a.json": {Data: vectorFile("c", good)}, "b.json": {Data: vectorFile("c", good)}}, "already used in a.json"},
		{"trailing data", fstest.MapFS{"a.json": {Data: append(vectorFile("c", good), "{}"...)}}, "trailing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := conformance.Run(context.Background(), tt.fs, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestRunOrderAndFailures(t *testing.T) {
	fsys := fstest.MapFS{
		"b.json": {Data: vectorFile("b",
			vec("b.unknown-kind", "no_such_kind", `{}`, `{}`),
			vec("b.ok", "artifact_encode", `{"type_tag":null,"bytes":""}`, `{"artifact_bytes":"000000000000000000"}`))},
		"a.json": {Data: vectorFile("a",
			vec("a.uppercase-hex", "artifact_encode", `{"type_tag":null,"bytes":"AA"}`, `{"artifact_bytes":"00000000000000000001aa"}`),
			vec("a.bad-tag", "artifact_encode", `{"type_tag":4294967296,"bytes":""}`, `{"artifact_bytes":"00"}`),
			vec("a.missing-bytes", "artifact_encode", `{"type_tag":null}`, `{"artifact_bytes":"00"}`),
			vec("a.reject-and-value", "artifact_decode", `{"artifact_bytes":"00"}`, `{"bytes":"","reject":{"field":"bytes length","offset":1}}`),
			vec("a.wrong-offset", "artifact_decode", `{"artifact_bytes":"00"}`, `{"reject":{"field":"bytes length","offset":0}}`),
			vec("a.ok-reject", "artifact_decode", `{"artifact_bytes":"00"}`, `{"reject":{"field":"bytes length","offset":1}}`))},
	}
	var got []string
	sum, err := conformance.Run(context.Background(), fsys, func(r conformance.Result) {
		got = append(got, fmt.Sprintf("%s:%t", r.ID, r.Pass))
		if !r.Pass && (r.Reason == "" || strings.Contains(r.Reason, "\n")) {
			t.Errorf("%s: reason %q is not one non-empty line", r.ID, r.Reason)
		}
		if r.Pass && r.Reason != "" {
			t.Errorf("%s passed with reason %q", r.ID, r.Reason)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a.uppercase-hex:false", "a.bad-tag:false", "a.missing-bytes:false", "a.reject-and-value:false",
		"a.wrong-offset:false", "a.ok-reject:true", "b.unknown-kind:false", "b.ok:true"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("results\n got %v\nwant %v", got, want)
	}
	if sum.Passed != 2 || sum.Failed != 6 || sum.Files != 2 || sum.String() != "2 passed, 6 failed" {
		t.Fatalf("summary %+v %q", sum, sum)
	}
}

func init() {
	conformance.Register("test_panic", func(context.Context, conformance.Vector) error { panic("boom") })
}

func TestPanickingCheckFails(t *testing.T) {
	fsys := fstest.MapFS{"a.json": {Data: vectorFile("a", vec("a.p", "test_panic", `{}`, `{}`))}}
	var reason string
	sum, err := conformance.Run(context.Background(), fsys, func(r conformance.Result) { reason = r.Reason })
	if err != nil || sum.Failed != 1 || !strings.Contains(reason, "boom") {
		t.Fatalf("sum %v err %v reason %q", sum, err, reason)
	}
}

// TestRunStopsOnCancel: a cancelled context stops the run before the
// first check. Run loads every file before it checks anything, so the
// directory holds one small frozen file (asl.text.json) rather than all of
// them (loading those costs a CPU-second under -race).
func TestRunStopsOnCancel(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(vectorDir, "asl.text.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "asl.text.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	checked := 0
	_, err = conformance.RunDir(ctx, dir, func(conformance.Result) { checked++ })
	if checked != 0 {
		t.Errorf("%d vectors checked after the cancel", checked)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestRunDirErrors(t *testing.T) {
	if _, err := conformance.RunDir(context.Background(), filepath.Join(t.TempDir(), "missing"), nil); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing dir err = %v", err)
	}
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o644)
	if _, err := conformance.RunDir(context.Background(), f, nil); err == nil {
		t.Fatal("RunDir accepted a regular file")
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("second Register of a kind did not panic")
		}
	}()
	conformance.Register(conformance.KindArtifactEncode, nil)
}

func TestHexJSON(t *testing.T) {
	for _, s := range []string{`"0a"`, `""`, `"00ff"`} {
		var h conformance.Hex
		if err := json.Unmarshal([]byte(s), &h); err != nil {
			t.Errorf("%s: %v", s, err)
		}
		back, _ := json.Marshal(h)
		if string(back) != s {
			t.Errorf("%s round-trips to %s", s, back)
		}
	}
	for _, s := range []string{`"0A"`, `"0"`, `"zz"`, `1`, `null`, `" 00"`} {
		var h conformance.Hex
		if err := json.Unmarshal([]byte(s), &h); err == nil && s != "null" {
			t.Errorf("%s accepted as %x", s, h)
		}
	}
}

// FuzzParseFile: whatever parses re-marshals, loads and runs without
// panicking. The seeds are the frozen vector files; for those the checks
// are not run here, only loaded: TestVectors runs the very same files and
// demands that every vector passes. The default run seeds every file of
// at most 1 MiB (all but pel.exec.json, whose two 1 MiB constants make it
// 4 MiB: parsing, re-marshalling and loading it cost some 2 CPU-seconds
// under -race); AMDUAT_LONG=1 seeds that one too (internal/longtest).
func FuzzParseFile(f *testing.F) {
	names, _ := filepath.Glob(filepath.Join(vectorDir, "*.json"))
	frozen := map[string]bool{}
	for _, n := range names {
		data, _ := os.ReadFile(n)
		if len(data) > 1<<20 && !longtest.Enabled() {
			continue
		}
		frozen[string(data)] = true
		f.Add(data)
	}
	f.Add([]byte(`{"format":"amduat-vectors/1","category":"c","vectors":[]}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := conformance.ParseFile(data)
		if err != nil {
			return
		}
		// Whatever parses also runs without panicking or loading errors.
		data2, err := json.Marshal(file)
		if err != nil {
			t.Fatal(err)
		}
		fsys := fstest.MapFS{"f.json": {Data: data2}}
		if frozen[string(data)] {
			if _, err := conformance.Load(fsys); err != nil {
				t.Fatalf("parsed file does not load after re-marshal: %v", err)
			}
			return
		}
		if _, err := conformance.Run(context.Background(), fsys, nil); err != nil {
			t.Fatalf("parsed file does not load after re-marshal: %v", err)
		}
	})
}

func FuzzHex(f *testing.F) {
	f.Add([]byte(`"00ff"`))
	f.Add([]byte(`"0F"`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var h conformance.Hex
		if err := json.Unmarshal(data, &h); err != nil {
			return
		}
		back, _ := json.Marshal(h)
		var again conformance.Hex
		if err := json.Unmarshal(back, &again); err != nil || !bytes.Equal(again, h) {
			t.Fatalf("%s -> %x -> %s does not round-trip", data, []byte(h), back)
		}
	})
}
