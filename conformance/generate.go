package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Generator computes the vectors of one category from a Go case table,
// using this implementation to fill in the expected values.
type Generator func() ([]Vector, error)

var generators = map[string]Generator{}

// RegisterGenerator installs the generator of a category (its vectors go to
// the file <category>.json). It is meant to be called from init functions;
// registering a category twice panics.
func RegisterGenerator(category string, g Generator) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := generators[category]; dup {
		panic("conformance: category registered twice: " + category)
	}
	generators[category] = g
}

// Categories lists the categories that have a generator, sorted.
func Categories() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	out := make([]string, 0, len(generators))
	for c := range generators {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// GenerateFile runs the generator of category and returns the file's bytes:
// indented JSON without HTML escaping, ending in a newline. The output is a
// pure function of the case table and the implementation.
func GenerateFile(category string) ([]byte, error) {
	regMu.RLock()
	g, ok := generators[category]
	regMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("no generator for category %q", category)
	}
	vs, err := g()
	if err != nil {
		return nil, fmt.Errorf("category %s: %w", category, err)
	}
	f := File{Format: Format, Category: category, Vectors: vs}
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	e.SetIndent("", "  ")
	if err := e.Encode(f); err != nil {
		return nil, fmt.Errorf("category %s: %w", category, err)
	}
	if _, err := ParseFile(buf.Bytes()); err != nil {
		return nil, fmt.Errorf("category %s: generated file does not parse: %w", category, err)
	}
	return buf.Bytes(), nil
}

// ErrUnknownCategory: Generate was asked for a category without generator.
var ErrUnknownCategory = errors.New("no generator for category")

// Generate writes <category>.json into dir for the given categories (all
// registered ones when none is given) and returns the paths written. This
// deliberately replaces the frozen expectations: run it only when the
// specification changed, and review the diff. Each file is written to a
// temporary name and renamed into place.
func Generate(dir string, categories ...string) ([]string, error) {
	if len(categories) == 0 {
		categories = Categories()
	}
	for _, c := range categories {
		regMu.RLock()
		_, ok := generators[c]
		regMu.RUnlock()
		if !ok {
			return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownCategory, c, strings.Join(Categories(), ", "))
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var written []string
	for _, c := range categories {
		data, err := GenerateFile(c)
		if err != nil {
			return written, err
		}
		p := filepath.Join(dir, c+".json")
		if err := writeFileAtomic(p, data); err != nil {
			return written, err
		}
		written = append(written, p)
	}
	return written, nil
}

func writeFileAtomic(p string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(p), ".vectors-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), p)
}

// NewVector builds a vector, marshalling input and expect.
func NewVector(id, description, spec, kind string, input, expect any) (Vector, error) {
	in, err := MarshalJSON(input)
	if err != nil {
		return Vector{}, fmt.Errorf("vector %s: input: %w", id, err)
	}
	ex, err := MarshalJSON(expect)
	if err != nil {
		return Vector{}, fmt.Errorf("vector %s: expect: %w", id, err)
	}
	return Vector{ID: id, Description: description, Spec: spec, Kind: kind, Input: in, Expect: ex}, nil
}
