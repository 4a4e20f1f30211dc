package main

import (
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
