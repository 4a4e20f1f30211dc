// Package fxutil holds what the built-in executors share (SPECS.md §23):
// strict decoding of canonical JSON params, canonical JSON encoding, name
// checks and bounded streaming of observations into a store.
package fxutil

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/plan/effect"
)

// Hash is the hash under which executors store their observations.
const Hash = asl.HashSHA256

// Invalid returns a final InvalidInput error.
func Invalid(format string, args ...any) error {
	return &effect.Error{Class: effect.InvalidInput, Msg: fmt.Sprintf(format, args...)}
}

// Classed returns an *effect.Error of class c.
func Classed(c effect.ErrorClass, format string, args ...any) error {
	return &effect.Error{Class: c, Msg: fmt.Sprintf(format, args...)}
}

// DecodeParams decodes one JSON object from b into v, refusing unknown
// fields and trailing data. Every failure is a final InvalidInput naming the
// effect kind.
func DecodeParams(kind string, b []byte, v any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return Invalid("%s params: empty, want a JSON object", kind)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return Invalid("%s params: %v", kind, err)
	}
	if _, err := d.Token(); err != io.EOF {
		return Invalid("%s params: data after the JSON object", kind)
	}
	return nil
}

// Canonical encodes v as the canonical JSON of SPECS.md §22.4 (the form
// of effect params): no white space, object members sorted bytewise by
// name, numbers as encoding/json writes them (integers in decimal), strings
// escaped only where JSON requires it (`"` and `\` with a backslash,
// \b \t \n \f \r, other controls below U+0020 as \u00xx in lower-case
// hex), every other character as its UTF-8 bytes. A string that is not
// UTF-8 has each bad byte replaced by U+FFFD (encoding/json's rule).
func Canonical(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var generic any
	if err := d.Decode(&generic); err != nil {
		return nil, err
	}
	return appendCanonical(nil, generic), nil
}

func appendCanonical(dst []byte, v any) []byte {
	switch v := v.(type) {
	case map[string]any:
		names := make([]string, 0, len(v))
		for name := range v {
			names = append(names, name)
		}
		sort.Strings(names)
		dst = append(dst, '{')
		for i, name := range names {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = effect.AppendJSONString(dst, name)
			dst = append(dst, ':')
			dst = appendCanonical(dst, v[name])
		}
		return append(dst, '}')
	case []any:
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendCanonical(dst, e)
		}
		return append(dst, ']')
	case string:
		return effect.AppendJSONString(dst, v)
	case json.Number:
		return append(dst, v...)
	case bool:
		return strconv.AppendBool(dst, v)
	}
	return append(dst, "null"...)
}

// CheckFileName refuses a name that is not one plain file name: empty, ".",
// "..", longer than 255 bytes, or holding '/', '\\' or NUL.
func CheckFileName(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return fmt.Errorf("file name %q is not allowed", name)
	case len(name) > 255:
		return fmt.Errorf("file name %.20q... is longer than 255 bytes", name)
	case strings.ContainsAny(name, "/\\\x00"):
		return fmt.Errorf("file name %q holds '/', '\\' or NUL", name)
	}
	return nil
}

// ErrLimit is returned by Spool when the stream is longer than its limit.
var ErrLimit = errors.New("size limit exceeded")

// memSpool is how much of a stream Spool keeps in memory before it spills
// to a temporary file.
const memSpool = 1 << 20

// Spool reads r to its end into a store as an untagged artifact, never
// holding more than 1 MiB in memory (the rest waits in a temporary file,
// removed before Spool returns). A stream longer than limit bytes is refused
// with an error wrapping ErrLimit, after reading at most limit+1 bytes.
func Spool(ctx context.Context, st asl.Receiver, r io.Reader, limit int64) (asl.Reference, int64, error) {
	var mem bytes.Buffer
	n, err := io.Copy(&mem, io.LimitReader(r, min(limit, memSpool)+1))
	if err != nil {
		return asl.Reference{}, n, err
	}
	if n > limit {
		return asl.Reference{}, n, fmt.Errorf("%w: more than %d bytes", ErrLimit, limit)
	}
	if n <= memSpool {
		ref, err := st.Put(ctx, Hash, asl.Header{Size: uint64(n)}, &mem)
		return ref, n, err
	}
	f, err := os.CreateTemp("", "amduat-spool-*")
	if err != nil {
		return asl.Reference{}, n, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if _, err := mem.WriteTo(f); err != nil {
		return asl.Reference{}, n, err
	}
	m, err := io.Copy(f, io.LimitReader(r, limit-n+1))
	n += m
	if err != nil {
		return asl.Reference{}, n, err
	}
	if n > limit {
		return asl.Reference{}, n, fmt.Errorf("%w: more than %d bytes", ErrLimit, limit)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return asl.Reference{}, n, err
	}
	ref, err := st.Put(ctx, Hash, asl.Header{Size: uint64(n)}, f)
	return ref, n, err
}

// PutBytes stores b as an untagged artifact.
func PutBytes(ctx context.Context, st asl.Receiver, b []byte) (asl.Reference, error) {
	return st.Put(ctx, Hash, asl.Header{Size: uint64(len(b))}, bytes.NewReader(b))
}

// FindInput returns the input named name.
func FindInput(req effect.Request, name string) (effect.Input, bool) {
	for _, in := range req.Inputs {
		if in.Name == name {
			return in, true
		}
	}
	return effect.Input{}, false
}
