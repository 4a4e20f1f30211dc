package wasmop_test

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/internal/longtest"
	"github.com/amduat/amduat/wasmop"
)

// TestExampleModulesDeterminism runs the Go-built example modules (checked
// in under examples/NAME/NAME.wasm, whose entry is named NAME) under the
// compiler and the interpreter on a few inputs and demands identical
// outputs, results and traces. Without examples it is skipped. It runs
// under -short too: with the conformance runner, which runs every wasm.run
// vector on both engines, it is the equivalence proof of SPECS.md §20.10.
// The default run takes the thumbnail example alone (its resizing is the
// float arithmetic where engines could part) and gives it no input and its
// own inputs; AMDUAT_LONG=1 (internal/longtest) takes every example and
// gives each every example's inputs. Each example costs some 5 CPU-seconds
// under -race, nearly all of it its module pass and the two engines'
// compilation (the interpreter's, and the compiler's validation on a cache
// hit), not its runs. The examples' golden tests (wasmop/examples) run
// every example under the compiler in every run.
func TestExampleModulesDeterminism(t *testing.T) {
	t.Parallel() // engines of its own; the compiler's cache is shared
	files, _ := filepath.Glob("examples/*/*.wasm")
	if len(files) == 0 {
		t.Skip("no example modules under examples/")
	}
	es := newEngines(t, wasmop.Options{})
	ran := 0
	for _, f := range files {
		name := filepath.Base(filepath.Dir(f))
		if name != "thumbnail" && !longtest.Enabled() {
			continue
		}
		ran++
		module, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p := wasmop.Params{Export: name, Outputs: 1, MaxMemoryPages: 2048, MaxOutputBytes: 1 << 20}
		warmCache(t, module, p.MaxMemoryPages)
		for _, in := range []struct {
			example string // whose input it is; "" for every example's
			inputs  []asl.Artifact
		}{
			{"", nil},
			{"wordcount", []asl.Artifact{asl.Untagged([]byte("one two  three\nfour"))}},
			{"jsonfield", []asl.Artifact{asl.Untagged([]byte(`{"a":[1,2.5,"x"]}`)), asl.Untagged([]byte("/a/1"))}},
			{"thumbnail", []asl.Artifact{asl.Untagged(gradientPNG(t)), asl.Untagged([]byte("7"))}},
		} {
			if in.example != "" && in.example != name && !longtest.Enabled() {
				continue
			}
			inputs := in.inputs
			o := es.runBoth(t, module, p, inputs...)
			t.Logf("%s with %d inputs: %s", name, len(inputs), o)
		}
	}
	if ran == 0 {
		t.Fatal("no thumbnail example under examples/")
	}
	t.Logf("%d of %d examples (%s=1 runs all)", ran, len(files), longtest.Env)
}

// gradientPNG is a 23x17 colour gradient: resizing it exercises float
// arithmetic in the thumbnail example.
func gradientPNG(t *testing.T) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 23, 17))
	for y := range 17 {
		for x := range 23 {
			img.Set(x, y, color.RGBA{uint8(x * 11), uint8(y * 15), uint8(x * y), 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
