// Package conformance loads the language-neutral test vectors under vectors/
// and checks this implementation against them (SPECS.md §7). The same runner
// serves `go test` and `amduat conformance run`.
//
// A vector file is one JSON document per category:
//
//	{"format":"amduat-vectors/1","category":"asl.artifact","vectors":[...]}
//
// Each vector names a kind; the check for a kind is registered with Register
// from the file that implements it (asl_checks.go for the ASL kinds), so new
// kinds plug in without touching the runner. Expected values are computed by
// the generators (RegisterGenerator, Generate) once and then frozen in the
// checked-in files: checks only read vector files, they never rewrite them.
//
// Invariants: files are read in lexical order of their names and vectors run
// in file order; ids are unique across all files and start with the file's
// category followed by "."; every byte string is lowercase hex.
package conformance

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// Format is the value of the "format" member of every vector file.
const Format = "amduat-vectors/1"

// File is one vector file: every vector of one category.
type File struct {
	Format   string   `json:"format"`
	Category string   `json:"category"`
	Vectors  []Vector `json:"vectors"`
}

// Vector is one test case. Input and Expect are kind-specific JSON objects
// that the kind's check decodes strictly with DecodeInput and DecodeExpect.
type Vector struct {
	ID          string          `json:"id"`
	Description string          `json:"description"`
	Spec        string          `json:"spec"`
	Kind        string          `json:"kind"`
	Input       json.RawMessage `json:"input"`
	Expect      json.RawMessage `json:"expect"`
}

// Loaded is a parsed vector file with the name it was read from.
type Loaded struct {
	Name string // file name within the vector directory
	File
}

// Hex is a byte string that appears in vector files as lowercase hex. It
// rejects uppercase digits, odd lengths and any other character.
type Hex []byte

// MarshalJSON encodes h as a lowercase hex JSON string.
func (h Hex) MarshalJSON() ([]byte, error) { return json.Marshal(hex.EncodeToString(h)) }

// UnmarshalJSON decodes a lowercase hex JSON string.
func (h *Hex) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("hex string: %w", err)
	}
	if len(s)%2 != 0 {
		return fmt.Errorf("hex string has odd length %d", len(s))
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return fmt.Errorf("hex string: character %q at position %d is not a lowercase hex digit", c, i)
		}
	}
	out, _ := hex.DecodeString(s)
	*h = out
	return nil
}

// ParseFile decodes one vector file strictly: unknown members, a wrong
// format, an empty category, or a vector without id or kind are errors.
func ParseFile(data []byte) (File, error) {
	var f File
	if err := decodeStrict(data, &f); err != nil {
		return File{}, err
	}
	if f.Format != Format {
		return File{}, fmt.Errorf("format %q, want %q", f.Format, Format)
	}
	if f.Category == "" {
		return File{}, errors.New("category is empty")
	}
	seen := make(map[string]bool, len(f.Vectors))
	for i, v := range f.Vectors {
		switch {
		case v.ID == "":
			return File{}, fmt.Errorf("vector %d: id is empty", i)
		case !strings.HasPrefix(v.ID, f.Category+"."):
			return File{}, fmt.Errorf("vector %s: id does not start with the category %q", v.ID, f.Category+".")
		case v.Kind == "":
			return File{}, fmt.Errorf("vector %s: kind is empty", v.ID)
		case len(v.Input) == 0 || len(v.Expect) == 0:
			return File{}, fmt.Errorf("vector %s: input and expect are required", v.ID)
		case seen[v.ID]:
			return File{}, fmt.Errorf("vector %s: duplicate id", v.ID)
		}
		seen[v.ID] = true
	}
	return f, nil
}

// Load reads every *.json file at the top of fsys in lexical order and checks
// that ids are unique across files. It fails if there is no vector file.
func Load(fsys fs.FS) ([]Loaded, error) {
	names, err := fs.Glob(fsys, "*.json")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil, errors.New("no vector files (*.json) found")
	}
	var out []Loaded
	ids := make(map[string]string)
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		f, err := ParseFile(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for _, v := range f.Vectors {
			if prev, ok := ids[v.ID]; ok {
				return nil, fmt.Errorf("%s: vector %s: id already used in %s", name, v.ID, prev)
			}
			ids[v.ID] = name
		}
		out = append(out, Loaded{Name: path.Base(name), File: f})
	}
	return out, nil
}

// DecodeInput decodes v.Input into dst, rejecting unknown members.
func DecodeInput(v Vector, dst any) error {
	if err := decodeStrict(v.Input, dst); err != nil {
		return fmt.Errorf("bad vector input: %w", err)
	}
	return nil
}

// DecodeExpect decodes v.Expect into dst, rejecting unknown members.
func DecodeExpect(v Vector, dst any) error {
	if err := decodeStrict(v.Expect, dst); err != nil {
		return fmt.Errorf("bad vector expect: %w", err)
	}
	return nil
}

func decodeStrict(data []byte, dst any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(dst); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// MarshalJSON encodes v as compact JSON without HTML escaping, so that
// descriptions like "<4 digits" stay readable in vector files.
func MarshalJSON(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
