package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/amduat/amduat/wasmop/guest"
)

// code is the failure code of err, 0 if nil.
func code(t *testing.T, err error) uint16 {
	t.Helper()
	if err == nil {
		return 0
	}
	var e *guest.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not a *guest.Error", err)
	}
	return e.Code
}

func TestExtract(t *testing.T) {
	doc := []byte(`{"a": {"b": [10, {"c": "x y"}, true]}, "a/b": 1, "m~n": [ ], "": {"": 2}}`)
	tests := []struct {
		pointer string
		want    string
		code    uint16
	}{
		{"", `{"a":{"b":[10,{"c":"x y"},true]},"a/b":1,"m~n":[],"":{"":2}}`, 0},
		{"/a", `{"b":[10,{"c":"x y"},true]}`, 0},
		{"/a/b/0", `10`, 0},
		{"/a/b/1/c", `"x y"`, 0},
		{"/a/b/2", `true`, 0},
		{"/a~1b", `1`, 0},
		{"/m~0n", `[]`, 0},
		{"//", `2`, 0},
		{"/a/b/3", "", codeNotFound},
		{"/a/b/01", "", codeNotFound},
		{"/a/b/-", "", codeNotFound},
		{"/a/b/0/x", "", codeNotFound},
		{"/zz", "", codeNotFound},
		{"a", "", codeBadPointer},
		{"/a~2", "", codeBadPointer},
		{"/a~", "", codeBadPointer},
	}
	for _, tt := range tests {
		got, err := extract(doc, tt.pointer)
		if c := code(t, err); c != tt.code || (c == 0 && string(got) != tt.want) {
			t.Errorf("extract(%q) = %s, %v; want %s, code %d", tt.pointer, got, err, tt.want, tt.code)
		}
	}
	if _, err := extract([]byte(`{"a":`), ""); code(t, err) != codeBadJSON {
		t.Errorf("truncated document: %v, want code %d", err, codeBadJSON)
	}
}

// FuzzExtract: any document and pointer give a value or a coded failure,
// never a panic; a value is valid compact JSON.
func FuzzExtract(f *testing.F) {
	f.Add([]byte(`{"a":[1,{"b":"c"}]}`), "/a/1/b")
	f.Add([]byte(`[0, 1, 2]`), "/2")
	f.Add([]byte(`{"":{"~/":true}}`), "//~0~1")
	f.Add([]byte(`"x"`), "")
	f.Add([]byte(`{"a":`), "/a")
	f.Fuzz(func(t *testing.T, doc []byte, pointer string) {
		out, err := extract(doc, pointer)
		if err != nil {
			if c := code(t, err); c < codeBadJSON || c > codeNotFound {
				t.Fatalf("failure code %d: %v", c, err)
			}
			return
		}
		if !json.Valid(out) || bytes.ContainsAny(out, "\n\t") {
			t.Fatalf("output %q is not compact JSON", out)
		}
	})
}
