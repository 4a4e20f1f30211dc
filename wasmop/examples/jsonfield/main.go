// Command jsonfield is an example operation for amduat.wasm.run (export
// "jsonfield", 1 output), written with package guest and built with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o jsonfield.wasm .
//
// (go run ./wasmop/examples/rebuild builds the checked-in jsonfield.wasm).
//
// Data input 0 is a JSON document, data input 1 a JSON Pointer (RFC 6901,
// e.g. "/items/0/name"; the empty pointer names the whole document). The
// output is the value the pointer names, as compact JSON (insignificant
// white space removed; strings, numbers and member order as in the input).
// Failure codes: 3 the document is not valid JSON; 4 the pointer is
// malformed; 5 the pointer names nothing in the document; 6 not exactly 2
// data inputs.
//
// Built for another platform the command does nothing.
package main

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/amduat/amduat/wasmop/guest"
)

// Failure codes (see the command's documentation).
const (
	codeBadJSON    = 3
	codeBadPointer = 4
	codeNotFound   = 5
	codeInputs     = 6
)

// extract returns the compact JSON of the value pointer names in doc.
func extract(doc []byte, pointer string) ([]byte, error) {
	if !json.Valid(doc) {
		return nil, guest.Fail(codeBadJSON, "input 0 is not valid JSON")
	}
	tokens, err := parsePointer(pointer)
	if err != nil {
		return nil, err
	}
	cur := json.RawMessage(doc)
	for n, tok := range tokens {
		at := "/" + strings.Join(tokens[:n], "/")
		switch firstByte(cur) {
		case '{':
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(cur, &obj); err != nil {
				return nil, guest.Fail(codeBadJSON, "input 0: %v", err)
			}
			v, ok := obj[tok]
			if !ok {
				return nil, guest.Fail(codeNotFound, "no member %q in the object at %q", tok, at)
			}
			cur = v
		case '[':
			var arr []json.RawMessage
			if err := json.Unmarshal(cur, &arr); err != nil {
				return nil, guest.Fail(codeBadJSON, "input 0: %v", err)
			}
			i, ok := arrayIndex(tok)
			if !ok || i >= len(arr) {
				return nil, guest.Fail(codeNotFound, "no element %q in the array of %d at %q", tok, len(arr), at)
			}
			cur = arr[i]
		default:
			return nil, guest.Fail(codeNotFound, "the value at %q is neither an object nor an array", at)
		}
	}
	var out bytes.Buffer
	if err := json.Compact(&out, cur); err != nil {
		return nil, guest.Fail(codeBadJSON, "input 0: %v", err)
	}
	return out.Bytes(), nil
}

// parsePointer splits a JSON Pointer into its unescaped reference tokens.
func parsePointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if p[0] != '/' {
		return nil, guest.Fail(codeBadPointer, "pointer %q does not start with \"/\"", p)
	}
	parts := strings.Split(p[1:], "/")
	for i, part := range parts {
		for j := 0; j < len(part); j++ {
			if part[j] == '~' && (j+1 == len(part) || (part[j+1] != '0' && part[j+1] != '1')) {
				return nil, guest.Fail(codeBadPointer, "pointer %q: \"~\" not followed by 0 or 1", p)
			}
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

// arrayIndex parses an RFC 6901 array index: "0" or digits without a
// leading zero.
func arrayIndex(tok string) (int, bool) {
	if tok == "" || (len(tok) > 1 && tok[0] == '0') {
		return 0, false
	}
	for _, c := range []byte(tok) {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	i, err := strconv.Atoi(tok)
	return i, err == nil
}

// firstByte is the first byte of v that is not JSON white space.
func firstByte(v []byte) byte {
	for _, b := range v {
		switch b {
		case ' ', '\t', '\n', '\r':
		default:
			return b
		}
	}
	return 0
}

func main() {}
