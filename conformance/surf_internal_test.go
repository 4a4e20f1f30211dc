package conformance

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every surface_run vector (damaged ones too, through
// pebblestore.Corrupt) is also run on a fresh Pebble store, and a vector
// whose expectations hold on memstore fails when the Pebble run is made to
// differ (here: a request whose stored program is removed from the vector,
// so both backends disagree with the expectation). The runner is given
// the files that hold surface_run vectors (TestVectors runs them all).
func TestSurfaceRunUsesBothBackends(t *testing.T) {
	files, err := FrozenVectors()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	want, damaged := int64(0), 0
	var sample Vector
	for _, f := range files {
		holds := false
		for _, v := range f.Vectors {
			var in surfRunInput
			if v.Kind == KindSurfaceRun && DecodeInput(v, &in) == nil {
				holds = true
				want++
				if len(in.Damaged) > 0 {
					damaged++
				}
				if strings.HasSuffix(v.ID, ".ok.const") {
					sample = v
				}
			}
		}
		if holds {
			data, err := os.ReadFile(filepath.Join("../vectors", f.Name))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f.Name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := pebbleSurfaceRuns.Load()
	sum, err := RunDir(context.Background(), dir, nil)
	if err != nil || sum.Failed != 0 {
		t.Fatalf("%v %v", sum, err)
	}
	if got := pebbleSurfaceRuns.Load() - before; got != want || want < 10 || damaged < 3 {
		t.Fatalf("%d Pebble runs for %d surface vectors (%d damaged)", got, want, damaged)
	}
	if sample.ID == "" {
		t.Fatal("no surf.run.ok.const vector")
	}
	var in map[string]any
	if err := json.Unmarshal(sample.Input, &in); err != nil {
		t.Fatal(err)
	}
	in["store"] = []any{}
	sample.Input, _ = json.Marshal(in)
	if err := checkSurfaceRun(context.Background(), sample); err == nil || !strings.Contains(err.Error(), "memstore") {
		t.Fatalf("a vector whose program is not stored passed: %v", err)
	}
	// Damage naming an artifact that is not stored is a bad vector.
	in["damaged"] = []any{map[string]any{"ref": "0001" + strings.Repeat("00", 32), "stored_bytes": ""}}
	sample.Input, _ = json.Marshal(in)
	if err := checkSurfaceRun(context.Background(), sample); err == nil || !strings.Contains(err.Error(), "cannot damage") {
		t.Fatalf("damage of an absent artifact: %v", err)
	}
}
