package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/plan/effect"
)

// The JSON plan format (SPECS.md §22.4).

// maxJSONDepth bounds the nesting of a JSON plan and of effect params.
const maxJSONDepth = 64

// jval is one parsed JSON value: members keep their order, and a name
// given twice is refused by the parser.
type jval struct {
	kind    byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	members []jmember
	elems   []jval
	str     string // string value, number text, "true"/"false"
}

type jmember struct {
	name string
	val  jval
}

func (v jval) kindName() string {
	switch v.kind {
	case 'o':
		return "an object"
	case 'a':
		return "an array"
	case 's':
		return "a string"
	case 'n':
		return "a number"
	case 'b':
		return "a boolean"
	}
	return "null"
}

func (v jval) get(name string) (jval, bool) {
	for _, m := range v.members {
		if m.name == name {
			return m.val, true
		}
	}
	return jval{}, false
}

// parseJSON parses one JSON value and nothing after it (white space
// aside), refusing duplicate member names and nesting deeper than
// maxJSONDepth.
func parseJSON(data []byte) (jval, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	v, err := parseValue(d, 0)
	if err != nil {
		return jval{}, err
	}
	if _, err := d.Token(); err != io.EOF {
		return jval{}, errors.New("data after the top-level value")
	}
	return v, nil
}

func parseValue(d *json.Decoder, depth int) (jval, error) {
	tok, err := d.Token()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return jval{}, err
	}
	return parseFrom(d, tok, depth)
}

func parseFrom(d *json.Decoder, tok json.Token, depth int) (jval, error) {
	switch t := tok.(type) {
	case json.Delim:
		if depth >= maxJSONDepth {
			return jval{}, fmt.Errorf("nested deeper than %d", maxJSONDepth)
		}
		if t == '{' {
			v := jval{kind: 'o'}
			seen := map[string]bool{}
			for d.More() {
				nt, err := d.Token()
				if err != nil {
					return jval{}, err
				}
				name, _ := nt.(string)
				if seen[name] {
					return jval{}, fmt.Errorf("member %q given twice", name)
				}
				seen[name] = true
				val, err := parseValue(d, depth+1)
				if err != nil {
					return jval{}, err
				}
				v.members = append(v.members, jmember{name, val})
			}
			_, err := d.Token()
			return v, err
		}
		if t == '[' {
			v := jval{kind: 'a'}
			for d.More() {
				val, err := parseValue(d, depth+1)
				if err != nil {
					return jval{}, err
				}
				v.elems = append(v.elems, val)
			}
			_, err := d.Token()
			return v, err
		}
		return jval{}, fmt.Errorf("unexpected %q", t)
	case string:
		return jval{kind: 's', str: t}, nil
	case json.Number:
		return jval{kind: 'n', str: string(t)}, nil
	case bool:
		return jval{kind: 'b', str: strconv.FormatBool(t)}, nil
	case nil:
		return jval{kind: 'z'}, nil
	}
	return jval{}, fmt.Errorf("unexpected token %v", tok)
}

// appendCanonical writes v in the canonical JSON of §22.4: no white space,
// members sorted bytewise by name, numbers as written, strings escaped
// only where JSON requires it.
func appendCanonical(dst []byte, v jval) []byte {
	switch v.kind {
	case 'o':
		ms := slices.Clone(v.members)
		slices.SortFunc(ms, func(a, b jmember) int { return strings.Compare(a.name, b.name) })
		dst = append(dst, '{')
		for i, m := range ms {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = effect.AppendJSONString(dst, m.name)
			dst = append(dst, ':')
			dst = appendCanonical(dst, m.val)
		}
		return append(dst, '}')
	case 'a':
		dst = append(dst, '[')
		for i, e := range v.elems {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendCanonical(dst, e)
		}
		return append(dst, ']')
	case 's':
		return effect.AppendJSONString(dst, v.str)
	case 'n', 'b':
		return append(dst, v.str...)
	}
	return append(dst, "null"...)
}

// CanonicalParams returns the canonical form (§22.4) of a JSON object of
// effect params.
func CanonicalParams(data []byte) ([]byte, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("params are not valid UTF-8")
	}
	v, err := parseJSON(data)
	if err != nil {
		return nil, fmt.Errorf("params: %w", err)
	}
	if v.kind != 'o' {
		return nil, fmt.Errorf("params: want an object, got %s", v.kindName())
	}
	return appendCanonical(nil, v), nil
}

// checkCanonicalParams reports why b is not the canonical form of a JSON
// object.
func checkCanonicalParams(b []byte) error {
	c, err := CanonicalParams(b)
	if err != nil {
		return err
	}
	if !bytes.Equal(c, b) {
		return fmt.Errorf("params are not in canonical form (want %q)", truncate(string(c), 80))
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Build parses a plan in the JSON format of SPECS.md §22.4 and validates
// it (§22.3). An error wraps ErrInvalidPlan and names the field by its
// place in the document: `steps[3].effect.gate: missing`.
func Build(data []byte) (Plan, error) {
	fail := func(format string, args ...any) (Plan, error) {
		return Plan{}, fmt.Errorf("%w: %s", ErrInvalidPlan, fmt.Sprintf(format, args...))
	}
	if !utf8.Valid(data) {
		return fail("the plan is not valid UTF-8")
	}
	root, err := parseJSON(data)
	if err != nil {
		return fail("json: %v", err)
	}
	if root.kind != 'o' {
		return fail("the plan: want an object, got %s", root.kindName())
	}
	if err := onlyMembers(root, "", "steps"); err != nil {
		return fail("%v", err)
	}
	steps, ok := root.get("steps")
	if !ok {
		return fail("steps: missing")
	}
	if steps.kind != 'a' {
		return fail("steps: want an array, got %s", steps.kindName())
	}
	var p Plan
	order := make(map[string]int, len(steps.elems))
	for i, sv := range steps.elems {
		s, err := buildStep(sv, fmt.Sprintf("steps[%d]", i))
		if err != nil {
			return Plan{}, fmt.Errorf("%w: %v", ErrInvalidPlan, err)
		}
		if j, dup := order[s.ID]; dup {
			return fail("steps[%d].id: step id %q is also the id of steps[%d]", i, s.ID, j)
		}
		order[s.ID] = i
		p.Steps = append(p.Steps, s)
	}
	// A binding to an unknown step is named by its input here; the
	// general rules would name the dependency it implies.
	for i, s := range p.Steps {
		for _, b := range s.Inputs {
			if _, ok := order[b.Step]; b.Step != "" && !ok {
				return fail("steps[%d].inputs.%s: unknown step %q", i, b.Name, b.Step)
			}
		}
	}
	n := Normalize(p)
	if is := checkPlan(n); is != nil {
		return fail("%s", is.path(n, order))
	}
	return n, nil
}

// onlyMembers refuses a member of v not in names.
func onlyMembers(v jval, at string, names ...string) error {
	for _, m := range v.members {
		if !slices.Contains(names, m.name) {
			if at == "" {
				return fmt.Errorf("unknown member %q", m.name)
			}
			return fmt.Errorf("%s: unknown member %q", at, m.name)
		}
	}
	return nil
}

func want(v jval, kind byte, at string) error {
	if v.kind != kind {
		return fmt.Errorf("%s: want %s, got %s", at, jval{kind: kind}.kindName(), v.kindName())
	}
	return nil
}

// required returns member name of v, which must be of kind.
func required(v jval, name string, kind byte, at string) (jval, error) {
	m, ok := v.get(name)
	if !ok {
		return jval{}, fmt.Errorf("%s.%s: missing", at, name)
	}
	return m, want(m, kind, at+"."+name)
}

func uint32Member(v jval, name, at string) (uint32, error) {
	m, err := required(v, name, 'n', at)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(m.str, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%s.%s: want an integer in [0, 2^32-1], got %s", at, name, m.str)
	}
	return uint32(n), nil
}

func refMember(v jval, at string) (asl.Reference, error) {
	if err := want(v, 's', at); err != nil {
		return asl.Reference{}, err
	}
	r, err := asl.ParseReference(v.str)
	if err != nil {
		return asl.Reference{}, fmt.Errorf("%s: %w", at, err)
	}
	return r, nil
}

func buildStep(v jval, at string) (Step, error) {
	var s Step
	if err := want(v, 'o', at); err != nil {
		return s, err
	}
	if err := onlyMembers(v, at, "id", "depends_on", "inputs", "pel", "effect"); err != nil {
		return s, err
	}
	id, err := required(v, "id", 's', at)
	if err != nil {
		return s, err
	}
	s.ID = id.str
	if deps, ok := v.get("depends_on"); ok {
		if err := want(deps, 'a', at+".depends_on"); err != nil {
			return s, err
		}
		for j, d := range deps.elems {
			if err := want(d, 's', fmt.Sprintf("%s.depends_on[%d]", at, j)); err != nil {
				return s, err
			}
			s.DependsOn = append(s.DependsOn, d.str)
		}
	}
	if ins, ok := v.get("inputs"); ok {
		if err := want(ins, 'o', at+".inputs"); err != nil {
			return s, err
		}
		for _, m := range ins.members {
			iat := at + ".inputs." + m.name
			b := Binding{Name: m.name}
			switch m.val.kind {
			case 's':
				if b.Ref, err = refMember(m.val, iat); err != nil {
					return s, err
				}
			case 'o':
				if err := onlyMembers(m.val, iat, "step", "output"); err != nil {
					return s, err
				}
				st, err := required(m.val, "step", 's', iat)
				if err != nil {
					return s, err
				}
				out, err := required(m.val, "output", 's', iat)
				if err != nil {
					return s, err
				}
				b.Step, b.Output = st.str, out.str
				if b.Step == "" {
					return s, fmt.Errorf("%s.step: empty", iat)
				}
			default:
				return s, fmt.Errorf("%s: want a reference or {\"step\":…,\"output\":…}, got %s", iat, m.val.kindName())
			}
			s.Inputs = append(s.Inputs, b)
		}
	}
	pel, isPEL := v.get("pel")
	eff, isEffect := v.get("effect")
	switch {
	case isPEL && isEffect:
		return s, fmt.Errorf("%s: both pel and effect (a step is one or the other)", at)
	case isPEL:
		s.Kind = PELStep
		pat := at + ".pel"
		if err := want(pel, 'o', pat); err != nil {
			return s, err
		}
		if err := onlyMembers(pel, pat, "program", "params"); err != nil {
			return s, err
		}
		prog, ok := pel.get("program")
		if !ok {
			return s, fmt.Errorf("%s.program: missing", pat)
		}
		if s.Program, err = refMember(prog, pat+".program"); err != nil {
			return s, err
		}
		if par, ok := pel.get("params"); ok {
			if s.Params, err = refMember(par, pat+".params"); err != nil {
				return s, err
			}
			s.HasParams = true
		}
	case isEffect:
		s.Kind = EffectStep
		if err := buildEffect(&s, eff, at+".effect"); err != nil {
			return s, err
		}
	default:
		return s, fmt.Errorf("%s: neither pel nor effect", at)
	}
	return s, nil
}

func buildEffect(s *Step, v jval, at string) error {
	if err := want(v, 'o', at); err != nil {
		return err
	}
	if err := onlyMembers(v, at, "kind", "params", "class", "gate", "retry", "cache", "key"); err != nil {
		return err
	}
	kind, err := required(v, "kind", 's', at)
	if err != nil {
		return err
	}
	s.Effect = kind.str
	params, err := required(v, "params", 'o', at)
	if err != nil {
		return err
	}
	s.EffectParams = appendCanonical(nil, params)
	enum := func(name string, values map[string]uint8) (uint8, error) {
		m, err := required(v, name, 's', at)
		if err != nil {
			return 0, err
		}
		x, ok := values[m.str]
		if !ok {
			names := make([]string, 0, len(values))
			for n := range values {
				names = append(names, strconv.Quote(n))
			}
			slices.Sort(names)
			return 0, fmt.Errorf("%s.%s: %q is not one of %s", at, name, m.str, strings.Join(names, ", "))
		}
		return x, nil
	}
	c, err := enum("class", map[string]uint8{"read_only": uint8(effect.ReadOnly), "produce_outcome": uint8(effect.ProduceOutcome), "external_send": uint8(effect.ExternalSend)})
	if err != nil {
		return err
	}
	s.Class = effect.Class(c)
	g, err := enum("gate", map[string]uint8{"none": uint8(GateNone), "approval": uint8(GateApproval)})
	if err != nil {
		return err
	}
	s.Gate = Gate(g)
	retry, err := required(v, "retry", 'o', at)
	if err != nil {
		return err
	}
	rat := at + ".retry"
	if err := onlyMembers(retry, rat, "max_attempts", "base_ms", "cap_ms"); err != nil {
		return err
	}
	if s.Retry.MaxAttempts, err = uint32Member(retry, "max_attempts", rat); err != nil {
		return err
	}
	if s.Retry.BaseMillis, err = uint32Member(retry, "base_ms", rat); err != nil {
		return err
	}
	if s.Retry.CapMillis, err = uint32Member(retry, "cap_ms", rat); err != nil {
		return err
	}
	cp, err := enum("cache", map[string]uint8{"none": uint8(CacheNone), "reuse": uint8(CacheReuse)})
	if err != nil {
		return err
	}
	s.Cache = CachePolicy(cp)
	if key, ok := v.get("key"); ok {
		if err := want(key, 's', at+".key"); err != nil {
			return err
		}
		if key.str == "" {
			return fmt.Errorf("%s.key: empty (omit it for the derived key)", at)
		}
		s.KeyTemplate = key.str
	}
	return nil
}

// JSON returns p in the JSON format of §22.4, deterministic: steps in
// plan order, one per line; members in the order id, depends_on, inputs,
// pel or effect; effect members in the order kind, params, class, gate,
// retry, cache, key; empty depends_on and inputs, absent params and an
// empty key template omitted. Build(p.JSON()) gives back Normalize(p).
func (p Plan) JSON() []byte {
	var b []byte
	b = append(b, "{\"steps\":["...)
	for i, s := range p.Steps {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, "\n  {\"id\":"...)
		b = effect.AppendJSONString(b, s.ID)
		if len(s.DependsOn) > 0 {
			b = append(b, ",\"depends_on\":["...)
			for j, d := range s.DependsOn {
				if j > 0 {
					b = append(b, ',')
				}
				b = effect.AppendJSONString(b, d)
			}
			b = append(b, ']')
		}
		if len(s.Inputs) > 0 {
			b = append(b, ",\"inputs\":{"...)
			for j, in := range s.Inputs {
				if j > 0 {
					b = append(b, ',')
				}
				b = effect.AppendJSONString(b, in.Name)
				b = append(b, ':')
				if in.Step != "" {
					b = append(b, "{\"step\":"...)
					b = effect.AppendJSONString(b, in.Step)
					b = append(b, ",\"output\":"...)
					b = effect.AppendJSONString(b, in.Output)
					b = append(b, '}')
				} else {
					b = effect.AppendJSONString(b, in.Ref.String())
				}
			}
			b = append(b, '}')
		}
		switch s.Kind {
		case PELStep:
			b = append(b, ",\"pel\":{\"program\":"...)
			b = effect.AppendJSONString(b, s.Program.String())
			if s.HasParams {
				b = append(b, ",\"params\":"...)
				b = effect.AppendJSONString(b, s.Params.String())
			}
			b = append(b, '}')
		case EffectStep:
			b = append(b, ",\"effect\":{\"kind\":"...)
			b = effect.AppendJSONString(b, s.Effect)
			b = append(b, ",\"params\":"...)
			if len(s.EffectParams) == 0 {
				b = append(b, "{}"...)
			} else {
				b = append(b, s.EffectParams...)
			}
			b = append(b, ",\"class\":"...)
			b = effect.AppendJSONString(b, s.Class.String())
			b = append(b, ",\"gate\":"...)
			b = effect.AppendJSONString(b, gateName(s.Gate))
			b = fmt.Appendf(b, ",\"retry\":{\"max_attempts\":%d,\"base_ms\":%d,\"cap_ms\":%d}", s.Retry.MaxAttempts, s.Retry.BaseMillis, s.Retry.CapMillis)
			b = append(b, ",\"cache\":"...)
			b = effect.AppendJSONString(b, cacheName(s.Cache))
			if s.KeyTemplate != "" {
				b = append(b, ",\"key\":"...)
				b = effect.AppendJSONString(b, s.KeyTemplate)
			}
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	if len(p.Steps) > 0 {
		b = append(b, '\n')
	}
	return append(b, "]}\n"...)
}

// gateName returns the gate's name in the JSON form.
func gateName(g Gate) string {
	switch g {
	case GateNone:
		return "none"
	case GateApproval:
		return "approval"
	}
	return fmt.Sprintf("gate(%d)", uint8(g))
}

// cacheName returns the cache policy's name in the JSON form.
func cacheName(c CachePolicy) string {
	switch c {
	case CacheNone:
		return "none"
	case CacheReuse:
		return "reuse"
	}
	return fmt.Sprintf("cache(%d)", uint8(c))
}
