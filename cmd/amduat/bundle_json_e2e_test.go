package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestExportImportJSONTypes pins the member types of export --json and
// import --json (SPECS.md §16.3): paths are strings, counts are integers,
// reference lists are arrays of text-form references, [] when empty (never
// null).
func TestExportImportJSONTypes(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.initStore()
	ref := strings.TrimSpace(c.runIn(strings.NewReader("hello"), "put").stdout)
	file := filepath.Join(c.cwd, "b.amdb")
	var ex map[string]any
	if err := json.Unmarshal([]byte(c.must(0, "--json", "export", "-o", file, ref).stdout), &ex); err != nil {
		t.Fatal(err)
	}
	isRefs := func(v any, n int) bool {
		a, ok := v.([]any)
		if !ok || len(a) != n {
			return false
		}
		for _, e := range a {
			if s, ok := e.(string); !ok || len(s) != 68 {
				return false
			}
		}
		return true
	}
	if ex["output"] != file || ex["artifacts"] != 1.0 || ex["bytes"] != 5.0 || !isRefs(ex["roots"], 1) || !isRefs(ex["absent"], 0) || !isRefs(ex["undecodable"], 0) || len(ex) != 6 {
		t.Fatalf("export --json %v", ex)
	}
	other := newCLI(t)
	other.initStore()
	var im struct {
		Files []map[string]any `json:"files"`
	}
	if err := json.Unmarshal([]byte(other.must(0, "--json", "import", file).stdout), &im); err != nil {
		t.Fatal(err)
	}
	if len(im.Files) != 1 {
		t.Fatalf("import --json %v", im)
	}
	f := im.Files[0]
	if f["input"] != file || f["artifacts"] != 1.0 || f["bytes"] != 5.0 || !isRefs(f["roots"], 1) || len(f) != 4 {
		t.Fatalf("import --json file %v", f)
	}
}
