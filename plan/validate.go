package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/enc"
	"github.com/amduat/amduat/plan/effect"
)

// issue is the first rule of SPECS.md §22.3 a plan breaks: the step (its
// index in the plan), the field in the decoder's naming (§22.2), the index
// of the depends_on entry or input within the step (-1 for neither), and
// what is wrong.
type issue struct {
	step  int
	field string
	index int
	msg   string
}

// offset maps an issue to the byte offset of its field in a decoded plan.
func (is *issue) offset(offs []stepOffsets) int {
	o := offs[is.step]
	at := func(list []int) int {
		if is.index >= 0 && is.index < len(list) {
			return list[is.index]
		}
		return o.id
	}
	switch is.field {
	case "step.id":
		return o.id
	case "step.kind":
		return o.kind
	case "step.depends_on":
		return at(o.deps)
	case "step.input.name":
		return at(o.inName)
	case "step.input.step":
		return at(o.inStep)
	case "step.input.output":
		return at(o.inOut)
	case "step.input.ref":
		return at(o.inRef)
	case "step.program":
		return o.program
	case "step.params":
		return o.params
	case "step.effect.kind":
		return o.effect
	case "step.effect.params":
		return o.eparams
	case "step.effect.class":
		return o.class
	case "step.effect.gate":
		return o.gate
	case "step.effect.retry.max_attempts":
		return o.maxAttempts
	case "step.effect.retry.base_ms":
		return o.base
	case "step.effect.retry.cap_ms":
		return o.cap
	case "step.effect.cache":
		return o.cache
	case "step.effect.key":
		return o.key
	}
	return o.id
}

// path names the issue in the JSON form (§22.4): steps[I].FIELD, where I is
// the step's position in the JSON document when order is given (Build) and
// in p otherwise.
func (is *issue) path(p Plan, order map[string]int) string {
	s := p.Steps[is.step]
	i := is.step
	if j, ok := order[s.ID]; ok {
		i = j
	}
	f := strings.TrimPrefix(is.field, "step.")
	switch {
	case strings.HasPrefix(f, "input."):
		name := ""
		if is.index >= 0 && is.index < len(s.Inputs) {
			name = s.Inputs[is.index].Name
		}
		f = "inputs." + name
	case f == "program" || f == "params":
		f = "pel." + f
	case f == "kind":
		return fmt.Sprintf("steps[%d] (%q): %s", i, s.ID, is.msg)
	}
	return fmt.Sprintf("steps[%d].%s: %s", i, f, is.msg)
}

// Validate reports the first rule of SPECS.md §22.3 that Normalize(p)
// breaks, wrapping ErrInvalidPlan and naming the field
// (`steps[3].effect.gate: unknown value 0x00`), or nil.
func Validate(p Plan) error {
	n := Normalize(p)
	if is := checkPlan(n); is != nil {
		return fmt.Errorf("%w: %s", ErrInvalidPlan, is.path(n, nil))
	}
	return nil
}

// checkPlan checks a plan in canonical order (Normalize's or the decoder's)
// against every rule of §22.3 in the order the section lists them: step by
// step, field by field, then cycles.
func checkPlan(p Plan) *issue {
	find := func(id string) int {
		i, ok := slices.BinarySearchFunc(p.Steps, id, func(s Step, id string) int { return strings.Compare(s.ID, id) })
		if !ok {
			return -1
		}
		return i
	}
	for i, s := range p.Steps {
		bad := func(field string, index int, format string, args ...any) *issue {
			return &issue{i, field, index, fmt.Sprintf(format, args...)}
		}
		if err := CheckIdent(s.ID); err != nil {
			return bad("step.id", -1, "step id %v", err)
		}
		if i > 0 && p.Steps[i-1].ID == s.ID {
			return bad("step.id", -1, "step id %q appears twice", s.ID)
		}
		for j, d := range s.DependsOn {
			switch k := find(d); {
			case k < 0:
				return bad("step.depends_on", j, "unknown step %q", d)
			case k == i:
				return bad("step.depends_on", j, "step %q depends on itself", d)
			}
		}
		for j, b := range s.Inputs {
			if err := CheckIdent(b.Name); err != nil {
				return bad("step.input.name", j, "input name %v", err)
			}
			if j > 0 && s.Inputs[j-1].Name == b.Name {
				return bad("step.input.name", j, "input %q appears twice", b.Name)
			}
			switch {
			case b.Step == "" && b.Ref.IsZero():
				return bad("step.input.ref", j, "input %q is bound to neither an artifact nor a step", b.Name)
			case b.Step != "" && !b.Ref.IsZero():
				return bad("step.input.ref", j, "input %q is bound to both an artifact and a step", b.Name)
			case b.Step == "" && b.Output != "":
				return bad("step.input.output", j, "input %q names an output but no step", b.Name)
			case b.Step != "":
				k := find(b.Step)
				if k < 0 {
					return bad("step.input.step", j, "input %q: unknown step %q", b.Name, b.Step)
				}
				if _, ok := slices.BinarySearch(s.DependsOn, b.Step); !ok {
					return bad("step.input.step", j, "input %q: step %q is not in depends_on", b.Name, b.Step)
				}
				if err := CheckOutputName(b.Output); err != nil {
					return bad("step.input.output", j, "input %q: output name %v", b.Name, err)
				}
				if p.Steps[k].Kind == PELStep {
					if _, ok := pelIndex(b.Output); !ok {
						return bad("step.input.output", j, "input %q: step %q is a PEL step, whose outputs are named 0, 1, … (got %q)", b.Name, b.Step, b.Output)
					}
				}
			}
		}
		switch s.Kind {
		case PELStep:
			if s.Effect != "" || s.EffectParams != nil || s.Class != 0 || s.Gate != 0 || s.Retry != (RetryPolicy{}) || s.Cache != 0 || s.KeyTemplate != "" {
				return bad("step.kind", -1, "a PEL step has effect declarations")
			}
			for j, b := range s.Inputs {
				if _, ok := pelIndex(b.Name); !ok {
					return bad("step.input.name", j, "a PEL step's inputs are named 0, 1, … (the program's input indices), got %q", b.Name)
				}
			}
			if n := len(s.Inputs); n > 0 {
				// Names are unique canonical decimals; they are 0..n-1 exactly
				// when the largest is n-1.
				max := uint32(0)
				at := 0
				for j, b := range s.Inputs {
					if v, _ := pelIndex(b.Name); v >= max {
						max, at = v, j
					}
				}
				if uint64(max) != uint64(n-1) {
					return bad("step.input.name", at, "a PEL step's inputs are 0..%d with none missing, got %q", n-1, s.Inputs[at].Name)
				}
			}
			if s.Program.IsZero() {
				return bad("step.program", -1, "missing")
			}
			if s.HasParams && s.Params.IsZero() {
				return bad("step.params", -1, "marked present with no reference")
			}
		case EffectStep:
			if !s.Program.IsZero() || s.HasParams {
				return bad("step.kind", -1, "an effect step has a program or params reference")
			}
			if err := CheckIdent(s.Effect); err != nil {
				return bad("step.effect.kind", -1, "effect kind %v", err)
			}
			if len(s.EffectParams) > MaxParams {
				return bad("step.effect.params", -1, "%d bytes exceeds %d", len(s.EffectParams), MaxParams)
			}
			if err := checkCanonicalParams(s.EffectParams); err != nil {
				return bad("step.effect.params", -1, "%v", err)
			}
			if !validEffectClass(uint8(s.Class)) {
				return bad("step.effect.class", -1, "unknown value 0x%02x", uint8(s.Class))
			}
			if s.Gate != GateNone && s.Gate != GateApproval {
				return bad("step.effect.gate", -1, "unknown value 0x%02x", uint8(s.Gate))
			}
			if s.Retry.MaxAttempts < 1 || s.Retry.MaxAttempts > MaxAttempts {
				return bad("step.effect.retry.max_attempts", -1, "%d is not in 1..%d", s.Retry.MaxAttempts, MaxAttempts)
			}
			if s.Retry.CapMillis < s.Retry.BaseMillis {
				return bad("step.effect.retry.cap_ms", -1, "cap %d ms is below base %d ms", s.Retry.CapMillis, s.Retry.BaseMillis)
			}
			if s.Cache != CacheNone && s.Cache != CacheReuse {
				return bad("step.effect.cache", -1, "unknown value 0x%02x", uint8(s.Cache))
			}
			if s.KeyTemplate != "" {
				if err := checkTemplate(s.KeyTemplate, s.Inputs); err != nil {
					return bad("step.effect.key", -1, "%v", err)
				}
			}
		default:
			return bad("step.kind", -1, "unknown value 0x%02x", uint8(s.Kind))
		}
	}
	return findCycle(p, find)
}

// pelIndex parses a PEL input or output index: a decimal u32 without sign
// or leading zeros ("0", "1", … "4294967295").
func pelIndex(s string) (uint32, bool) {
	if s == "" || len(s) > 10 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(s, 10, 32)
	return uint32(v), err == nil
}

// findCycle returns an issue naming one cycle of depends_on, or nil. It is
// iterative (Kahn's algorithm, then a walk inside what is left), so a long
// chain cannot overflow a stack. The cycle reported starts at the first
// step, in id order, that lies on a cycle, and follows each step's first
// (in id order) dependency that stays on it.
func findCycle(p Plan, find func(string) int) *issue {
	n := len(p.Steps)
	pending := make([]int, n) // dependencies not yet done
	users := make([][]int, n) // steps that depend on each step
	for i, s := range p.Steps {
		pending[i] = len(s.DependsOn)
		for _, d := range s.DependsOn {
			k := find(d)
			users[k] = append(users[k], i)
		}
	}
	queue := make([]int, 0, n)
	for i := range pending {
		if pending[i] == 0 {
			queue = append(queue, i)
		}
	}
	for q := 0; q < len(queue); q++ {
		for _, u := range users[queue[q]] {
			if pending[u]--; pending[u] == 0 {
				queue = append(queue, u)
			}
		}
	}
	if len(queue) == n {
		return nil
	}
	// Every step left depends on at least one step left; walking from the
	// first one along such dependencies must revisit a step.
	seen := make(map[int]int) // step -> position in walk
	var walk []int
	cur := -1
	for i := range pending {
		if pending[i] > 0 {
			cur = i
			break
		}
	}
	for {
		if _, ok := seen[cur]; ok {
			break
		}
		seen[cur] = len(walk)
		walk = append(walk, cur)
		for _, d := range p.Steps[cur].DependsOn {
			if k := find(d); pending[k] > 0 {
				cur = k
				break
			}
		}
	}
	cycle := walk[seen[cur]:]
	// Start the reported cycle at its smallest step (the order of p).
	at := slices.Index(cycle, slices.Min(cycle))
	cycle = append(cycle[at:], cycle[:at]...)
	names := make([]string, 0, len(cycle)+1)
	for _, k := range cycle {
		names = append(names, strconv.Quote(p.Steps[k].ID))
	}
	names = append(names, names[0])
	first, next := cycle[0], p.Steps[cycle[(1)%len(cycle)]].ID
	j := slices.Index(p.Steps[first].DependsOn, next)
	return &issue{first, "step.depends_on", j, "cycle: " + strings.Join(names, " depends on ")}
}

// Key templates (SPECS.md §22.5).

// checkTemplate reports why t is not a key template whose input
// placeholders name inputs of the step.
func checkTemplate(t string, inputs []Binding) error {
	if err := checkText(t, MaxKeyTemplate, true, true); err != nil {
		return fmt.Errorf("key template %v", err)
	}
	return walkTemplate(t, func(lit string) {}, func(ph string) error {
		switch ph {
		case "kind", "step", "plan", "params", "derived":
			return nil
		}
		if name, ok := strings.CutPrefix(ph, "input:"); ok {
			for _, b := range inputs {
				if b.Name == name {
					return nil
				}
			}
			return fmt.Errorf("key template: {input:%s} names no input of the step", name)
		}
		return fmt.Errorf("key template: unknown placeholder {%s}", ph)
	})
}

// walkTemplate splits t into literal runs and placeholders: `{{` and `}}`
// are literal braces, `{NAME}` a placeholder; a lone `}` or an unclosed
// `{` is an error.
func walkTemplate(t string, lit func(string), ph func(string) error) error {
	var b strings.Builder
	for i := 0; i < len(t); i++ {
		switch c := t[i]; c {
		case '{':
			if i+1 < len(t) && t[i+1] == '{' {
				b.WriteByte('{')
				i++
				continue
			}
			end := strings.IndexAny(t[i+1:], "{}")
			if end < 0 || t[i+1+end] != '}' {
				return fmt.Errorf("key template: placeholder at byte %d is not closed", i)
			}
			if b.Len() > 0 {
				lit(b.String())
				b.Reset()
			}
			if err := ph(t[i+1 : i+1+end]); err != nil {
				return err
			}
			i += end + 1
		case '}':
			if i+1 < len(t) && t[i+1] == '}' {
				b.WriteByte('}')
				i++
				continue
			}
			return fmt.Errorf("key template: lone '}' at byte %d (write '}}')", i)
		default:
			b.WriteByte(c)
		}
	}
	if b.Len() > 0 {
		lit(b.String())
	}
	return nil
}

// keyDomain starts the bytes hashed by DeriveKey.
const keyDomain = "amduat-effect-key/1"

// DeriveKey returns the default idempotency key of an effect step whose
// inputs resolved to inputs (SPECS.md §22.5): the lowercase hex SHA-256 of
//
//	bytes32("amduat-effect-key/1") ‖ bytes32(kind) ‖ bytes32(params)
//	‖ u32 count ‖ (bytes32(name) ‖ EncodedRef(ref)) × count
//
// with the inputs sorted by name. The plan, the step id, the attempt and
// any time are not part of it, so the same call from any plan has the same
// key (action-level idempotency, seed 004 §7.3.1). Inputs with duplicate
// names are hashed as given, in sorted order.
func DeriveKey(s Step, inputs []effect.Input) string {
	sorted := slices.Clone(inputs)
	slices.SortStableFunc(sorted, func(a, b effect.Input) int { return strings.Compare(a.Name, b.Name) })
	w := enc.Writer{}
	w.Bytes32([]byte(keyDomain))
	w.Bytes32([]byte(s.Effect))
	w.Bytes32(s.EffectParams)
	w.U32(uint32(len(sorted)))
	for _, in := range sorted {
		w.Bytes32([]byte(in.Name))
		w.Buf = asl.AppendEncodedRef(w.Buf, in.Ref)
	}
	sum := sha256.Sum256(w.Buf)
	return hex.EncodeToString(sum[:])
}

// ErrKey is wrapped by StepKey's errors.
var ErrKey = errors.New("idempotency key")

// StepKey returns the idempotency key of effect step s of the plan whose
// reference is planRef, its inputs resolved to inputs (§22.5): DeriveKey
// when s has no template, else the template expanded. Placeholders:
// {kind} the effect kind, {step} the step id, {plan} the plan reference in
// text form, {params} the lowercase hex SHA-256 of the canonical params,
// {input:NAME} the text form of input NAME's reference, {derived}
// DeriveKey's key. The result is 1 to MaxKey bytes.
func StepKey(s Step, planRef asl.Reference, inputs []effect.Input) (string, error) {
	if s.KeyTemplate == "" {
		return DeriveKey(s, inputs), nil
	}
	var b strings.Builder
	err := walkTemplate(s.KeyTemplate, func(lit string) { b.WriteString(lit) }, func(ph string) error {
		switch ph {
		case "kind":
			b.WriteString(s.Effect)
		case "step":
			b.WriteString(s.ID)
		case "plan":
			b.WriteString(planRef.String())
		case "params":
			sum := sha256.Sum256(s.EffectParams)
			b.WriteString(hex.EncodeToString(sum[:]))
		case "derived":
			b.WriteString(DeriveKey(s, inputs))
		default:
			name, ok := strings.CutPrefix(ph, "input:")
			if !ok {
				return fmt.Errorf("unknown placeholder {%s}", ph)
			}
			i := slices.IndexFunc(inputs, func(in effect.Input) bool { return in.Name == name })
			if i < 0 {
				return fmt.Errorf("{input:%s}: no such resolved input", name)
			}
			b.WriteString(inputs[i].Ref.String())
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("%w: step %q: %w", ErrKey, s.ID, err)
	}
	key := b.String()
	if err := checkText(key, MaxKey, true, true); err != nil {
		return "", fmt.Errorf("%w: step %q: key %v", ErrKey, s.ID, err)
	}
	return key, nil
}
