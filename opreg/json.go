package opreg

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/amduat/amduat/asl"
)

// Readable params of the kernel operations in the JSON program format
// (SPECS.md §15):
//
//	pel.bytes.const   {"text":"hello"} or {"hex":"68656c6c6f"}, plus optional "type_tag":"0x00000042"
//	pel.bytes.slice   {"offset":1,"length":3}
//	others            omitted (null and {} are accepted on input)

// StrictUnmarshal decodes raw into v rejecting unknown fields and trailing
// data (anything but white space after the value, a stray ']' or '}'
// included): the rule for every readable params form and for the JSON
// program format. Member names must be written exactly (checkMemberNames),
// not matched as encoding/json matches them.
func StrictUnmarshal(raw []byte, v any) error {
	if err := checkMemberNames(raw); err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	// More reports false before a closing bracket, so a stray one would
	// pass it; only the end of the input may follow.
	if _, err := d.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// checkMemberNames rejects an object that names a member twice, or a
// member name with a character outside a-z, 0-9 and _ (SPECS.md §15).
// Every member name of the JSON program format and of the readable params
// is of that form, so with unknown names rejected by the decoder, a name
// must match exactly: encoding/json alone would take "Nodes", "ID" or
// "nodeſ" (Unicode case folding) for a member, and the last of duplicate
// names. Malformed JSON is left to the decoder, which reports it.
func checkMemberNames(raw []byte) error {
	type frame struct {
		object, wantKey bool
		keys            map[string]bool
	}
	var stack []frame
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].wantKey = true
		}
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	for {
		tok, err := d.Token()
		if err != nil {
			return nil // the end, or an error the decoder reports
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantKey {
			if tok == json.Delim('}') {
				stack = stack[:n-1]
				valueDone()
				continue
			}
			name, _ := tok.(string)
			for i := 0; i < len(name); i++ {
				if c := name[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
					return fmt.Errorf("member name %q: names are written exactly as specified (a-z, 0-9 and _)", name)
				}
			}
			if stack[n-1].keys[name] {
				return fmt.Errorf("member name %q appears twice in one object", name)
			}
			stack[n-1].keys[name] = true
			stack[n-1].wantKey = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{object: true, wantKey: true, keys: map[string]bool{}})
		case json.Delim('['):
			stack = append(stack, frame{})
		case json.Delim(']'), json.Delim('}'):
			stack = stack[:len(stack)-1]
			valueDone()
		default:
			valueDone()
		}
	}
}

// MarshalJSONCompact encodes v as compact JSON without HTML escaping, the
// form every readable params value is written in.
func MarshalJSONCompact(v any) ([]byte, error) {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

type constJSON struct {
	Text    *string          `json:"text,omitempty"`
	Hex     *string          `json:"hex,omitempty"`
	TypeTag *json.RawMessage `json:"type_tag,omitempty"`
}

func constToJSON(v any) ([]byte, error) {
	p, ok := v.(ConstParams)
	if !ok {
		return nil, fmt.Errorf("%s params: %w: want opreg.ConstParams, got %T", NameConst, ErrParams, v)
	}
	var j constJSON
	if utf8.Valid(p.Bytes) {
		s := string(p.Bytes)
		j.Text = &s
	} else {
		s := hex.EncodeToString(p.Bytes)
		j.Hex = &s
	}
	if p.HasTag {
		t := json.RawMessage(strconv.Quote(fmt.Sprintf("0x%08x", uint32(p.Tag))))
		j.TypeTag = &t
	}
	return MarshalJSONCompact(j)
}

func constFromJSON(raw []byte) (any, error) {
	fail := func(format string, args ...any) (any, error) {
		return nil, fmt.Errorf("%s params: %w: %s", NameConst, ErrParams, fmt.Sprintf(format, args...))
	}
	if raw == nil {
		return fail(`want {"text":...} or {"hex":...}`)
	}
	var j constJSON
	if err := StrictUnmarshal(raw, &j); err != nil {
		return fail("%v", err)
	}
	var p ConstParams
	switch {
	case (j.Text == nil) == (j.Hex == nil):
		return fail(`exactly one of "text" and "hex" is required`)
	case j.Text != nil:
		p.Bytes = []byte(*j.Text)
	default:
		b, err := hex.DecodeString(*j.Hex)
		if err != nil {
			return fail("hex: %v", err)
		}
		p.Bytes = b
	}
	if j.TypeTag != nil {
		tag, err := ParseTypeTagJSON(*j.TypeTag)
		if err != nil {
			return fail("type_tag: %v", err)
		}
		p.HasTag, p.Tag = true, tag
	}
	if len(p.Bytes) > MaxConstBytes {
		return fail("%d bytes exceed the maximum %d", len(p.Bytes), MaxConstBytes)
	}
	return p, nil
}

// ParseTypeTagJSON accepts a type tag written as a JSON string "0x" followed
// by 1 to 8 hex digits, or as a JSON integer in [0, 2^32-1].
func ParseTypeTagJSON(raw []byte) (asl.TypeTag, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		h, ok := strings.CutPrefix(s, "0x")
		if !ok || len(h) < 1 || len(h) > 8 {
			return 0, fmt.Errorf("%q: want \"0x\" and 1 to 8 hex digits", s)
		}
		v, err := strconv.ParseUint(h, 16, 32)
		if err != nil {
			return 0, fmt.Errorf("%q: want \"0x\" and 1 to 8 hex digits", s)
		}
		return asl.TypeTag(v), nil
	}
	var n uint32
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, fmt.Errorf("want a \"0x...\" string or an integer in [0, 4294967295]: %v", err)
	}
	return asl.TypeTag(n), nil
}

type sliceJSON struct {
	Offset *uint64 `json:"offset"`
	Length *uint64 `json:"length"`
}

func sliceToJSON(v any) ([]byte, error) {
	p, ok := v.(SliceParams)
	if !ok {
		return nil, fmt.Errorf("%s params: %w: want opreg.SliceParams, got %T", NameSlice, ErrParams, v)
	}
	return MarshalJSONCompact(sliceJSON{Offset: &p.Offset, Length: &p.Length})
}

func sliceFromJSON(raw []byte) (any, error) {
	var j sliceJSON
	if raw == nil {
		return nil, fmt.Errorf(`%s params: %w: want {"offset":N,"length":N}`, NameSlice, ErrParams)
	}
	if err := StrictUnmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("%s params: %w: %v", NameSlice, ErrParams, err)
	}
	if j.Offset == nil || j.Length == nil {
		return nil, fmt.Errorf(`%s params: %w: "offset" and "length" are both required`, NameSlice, ErrParams)
	}
	return SliceParams{Offset: *j.Offset, Length: *j.Length}, nil
}

func emptyToJSON(any) ([]byte, error) { return nil, nil }

func emptyFromJSON(name string) func([]byte) (any, error) {
	return func(raw []byte) (any, error) {
		t := bytes.TrimSpace(raw)
		if raw == nil || bytes.Equal(t, []byte("null")) {
			return NoParams{}, nil
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(t, &m); err != nil || len(m) != 0 {
			return nil, fmt.Errorf("%s params: %w: takes no params (omit them, or write null or {})", name, ErrParams)
		}
		return NoParams{}, nil
	}
}
