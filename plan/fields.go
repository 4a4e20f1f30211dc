package plan

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/enc"
	"github.com/amduat/amduat/plan/effect"
)

// Field rules shared by the encodings of SPECS.md §22.1.
const (
	// MaxIdent is the longest identifier (step id, input name, effect kind).
	MaxIdent = 128
	// MaxName is the longest output name, executor name or version, actor.
	MaxName = 255
	// MaxKey is the longest idempotency key.
	MaxKey = 4096
	// MaxKeyTemplate is the longest key template.
	MaxKeyTemplate = 1024
	// MaxText is the longest message or reason.
	MaxText = 65536
	// MaxParams is the longest effect params (canonical JSON).
	MaxParams = 1 << 20
	// MaxAttempts bounds a retry policy's max_attempts.
	MaxAttempts = 1000
)

// ErrInvalidPlan is wrapped by every refusal of Build, Validate and
// Plan.Encode: a plan no PLAN/1 bytes may hold.
var ErrInvalidPlan = errors.New("invalid plan")

// ErrInvalidRecord is wrapped by the encoders of receipts, events,
// submissions and effect requests when a value breaks a rule of §22.
var ErrInvalidRecord = errors.New("invalid record")

// ErrWrongTag is wrapped when an artifact given to a Decode…Artifact
// function does not carry the expected type tag.
var ErrWrongTag = errors.New("wrong type tag")

// CheckIdent reports why s is not an identifier (§22.1): 1 to MaxIdent
// bytes of A-Z a-z 0-9 '.' '_' '-', and neither "." nor "..".
func CheckIdent(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	if len(s) > MaxIdent {
		return fmt.Errorf("%d bytes exceeds %d", len(s), MaxIdent)
	}
	if s == "." || s == ".." {
		return fmt.Errorf("%q is not allowed", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%q: byte 0x%02x at %d is not in A-Z a-z 0-9 . _ -", s, c, i)
		}
	}
	return nil
}

// checkText reports why s is not text of at most max bytes: valid UTF-8
// and, when line is set, no control character (U+0000-U+001F, U+007F).
// Empty text passes unless nonEmpty.
func checkText(s string, max int, nonEmpty, line bool) error {
	if nonEmpty && s == "" {
		return errors.New("empty")
	}
	if len(s) > max {
		return fmt.Errorf("%d bytes exceeds %d", len(s), max)
	}
	if !utf8.ValidString(s) {
		return errors.New("not valid UTF-8")
	}
	if line {
		for i := 0; i < len(s); i++ {
			if s[i] < 0x20 || s[i] == 0x7f {
				return fmt.Errorf("control byte 0x%02x at %d", s[i], i)
			}
		}
	}
	return nil
}

// CheckOutputName reports why s cannot name an output (§22.1): 1 to
// MaxName bytes of UTF-8 without control characters.
func CheckOutputName(s string) error { return checkText(s, MaxName, true, true) }

// readText reads a bytes32 field and checks it with check, reporting a
// failure at the length prefix's offset.
func readText(r *enc.Reader, field string, check func(string) error) (string, error) {
	start := r.Offset()
	b := r.Bytes32(field)
	if r.Err() != nil {
		return "", r.Err()
	}
	s := string(b)
	if err := check(s); err != nil {
		return "", r.FailAt(start, field, "%v", err)
	}
	return s, nil
}

// readFlag reads a u8 and checks it is one of the listed values.
func readFlag(r *enc.Reader, field string, ok func(uint8) bool) (uint8, error) {
	start := r.Offset()
	v := r.U8(field)
	if r.Err() != nil {
		return 0, r.Err()
	}
	if !ok(v) {
		return 0, r.FailAt(start, field, "unknown value 0x%02x", v)
	}
	return v, nil
}

// named is one name-and-reference pair of a sorted list (inputs, outputs).
type named struct {
	Name string
	Ref  asl.Reference
}

// sortNamed returns a sorted copy of list and refuses duplicate names,
// names check refuses and zero references.
func sortNamed(list []named, what string, check func(string) error) ([]named, error) {
	out := slices.Clone(list)
	slices.SortFunc(out, func(a, b named) int { return strings.Compare(a.Name, b.Name) })
	for i, n := range out {
		if err := check(n.Name); err != nil {
			return nil, fmt.Errorf("%s name %q: %v", what, n.Name, err)
		}
		if i > 0 && out[i-1].Name == n.Name {
			return nil, fmt.Errorf("%s name %q appears twice", what, n.Name)
		}
		if n.Ref.IsZero() {
			return nil, fmt.Errorf("%s %q: no reference", what, n.Name)
		}
	}
	return out, nil
}

// appendNamed writes count (u32) then name (bytes32) ‖ ref (EncodedRef)
// for each entry of a list sortNamed accepted.
func appendNamed(w *enc.Writer, list []named) {
	w.U32(uint32(len(list)))
	for _, n := range list {
		w.Bytes32([]byte(n.Name))
		w.Buf = asl.AppendEncodedRef(w.Buf, n.Ref)
	}
}

// minNamed is the smallest encoded entry: a 1-byte name and a 2-byte
// EncodedRef.
const minNamed = 4 + 1 + 4 + 2

// readNamed reads a list written by appendNamed: names checked by check,
// strictly ascending bytewise.
func readNamed(r *enc.Reader, field string, check func(string) error) ([]named, error) {
	n := r.Count(field+"_count", minNamed)
	if r.Err() != nil {
		return nil, r.Err()
	}
	var out []named
	if n > 0 {
		out = make([]named, 0, n)
	}
	for i := 0; i < n; i++ {
		start := r.Offset()
		name, err := readText(r, field+".name", check)
		if err != nil {
			return nil, err
		}
		if i > 0 && out[i-1].Name >= name {
			return nil, r.FailAt(start, field+".name", "%q is not after %q (names are unique and sorted bytewise)", name, out[i-1].Name)
		}
		ref, err := asl.ReadEncodedRef(r, field+".ref")
		if err != nil {
			return nil, err
		}
		out = append(out, named{name, ref})
	}
	return out, nil
}

func inputsToNamed(in []effect.Input) []named {
	out := make([]named, len(in))
	for i, x := range in {
		out[i] = named{x.Name, x.Ref}
	}
	return out
}

func namedToInputs(in []named) []effect.Input {
	if in == nil {
		return nil
	}
	out := make([]effect.Input, len(in))
	for i, x := range in {
		out[i] = effect.Input{Name: x.Name, Ref: x.Ref}
	}
	return out
}

func outputsToNamed(in []effect.Output) []named {
	out := make([]named, len(in))
	for i, x := range in {
		out[i] = named{x.Name, x.Ref}
	}
	return out
}

func namedToOutputs(in []named) []effect.Output {
	if in == nil {
		return nil
	}
	out := make([]effect.Output, len(in))
	for i, x := range in {
		out[i] = effect.Output{Name: x.Name, Ref: x.Ref}
	}
	return out
}

// checkVersion reads the leading version byte, which is 0x01 in every
// encoding of §22.
func checkVersion(r *enc.Reader) error {
	_, err := readFlag(r, "version", func(v uint8) bool { return v == 1 })
	return err
}

// decodeArtifact checks a's tag and returns its bytes.
func artifactBytes(a asl.Artifact, tag asl.TypeTag, what string) ([]byte, error) {
	if !a.HasTag || a.Tag != tag {
		return nil, fmt.Errorf("%w: %s: type tag is %s, want 0x%08x", ErrWrongTag, what, a.Header().TagString(), uint32(tag))
	}
	return a.Bytes, nil
}

// validEffectClass reports whether c is a class of plan/effect.
func validEffectClass(c uint8) bool {
	return c >= uint8(effect.ReadOnly) && c <= uint8(effect.ExternalSend)
}

// validErrorClass reports whether c is 0 (none) or a class of plan/effect.
func validErrorClass(c uint8) bool {
	return c == 0 || c >= 1 && c <= 4 || c >= 16 && c <= 20
}

// effectClass converts a checked class byte.
func effectClass(c uint8) effect.Class { return effect.Class(c) }
