package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/enc"
)

// Input sources of a PLAN/1 binding (SPECS.md §22.2).
const (
	sourceArtifact = 0x01 // an EncodedRef follows
	sourceStep     = 0x02 // a step id and an output name follow
)

// Minimum encoded sizes used by the count checks of §22.2.
const (
	minStep    = 5 + 4 + 4 + 1 + 7 // id, deps count, inputs count, kind, a PEL body (EncodedRef + 0x00)
	minDep     = 5
	minBinding = 5 + 1 + 6 // name, source, a 2-byte EncodedRef
)

// Normalize returns p in the canonical form PLAN/1 encodes (§22.2): steps
// sorted by id, each step's depends_on sorted, deduplicated and holding
// every step an input is bound to, inputs sorted by name. p is not
// modified. Normalize checks nothing; Validate does.
func Normalize(p Plan) Plan {
	out := Plan{Steps: make([]Step, len(p.Steps))}
	for i, s := range p.Steps {
		deps := slices.Clone(s.DependsOn)
		for _, b := range s.Inputs {
			if b.Step != "" {
				deps = append(deps, b.Step)
			}
		}
		slices.Sort(deps)
		s.DependsOn = slices.Compact(deps)
		if len(s.DependsOn) == 0 {
			s.DependsOn = nil
		}
		s.Inputs = slices.Clone(s.Inputs)
		slices.SortStableFunc(s.Inputs, func(a, b Binding) int { return strings.Compare(a.Name, b.Name) })
		if len(s.Inputs) == 0 {
			s.Inputs = nil
		}
		s.EffectParams = slices.Clone(s.EffectParams)
		out.Steps[i] = s
	}
	slices.SortStableFunc(out.Steps, func(a, b Step) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Encode returns the PlanBytes (SPECS.md §22.2) of Normalize(p), refusing
// (wrapping ErrInvalidPlan) a plan Validate refuses.
func (p Plan) Encode() ([]byte, error) {
	n := Normalize(p)
	if is := checkPlan(n); is != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalidPlan, is.path(n, nil))
	}
	return encodePlan(n), nil
}

// Artifact returns the PLAN/1 artifact (tag TagPlan) of p.
func (p Plan) Artifact() (asl.Artifact, error) {
	b, err := p.Encode()
	if err != nil {
		return asl.Artifact{}, err
	}
	return asl.Tagged(TagPlan, b), nil
}

func encodePlan(p Plan) []byte {
	w := enc.Writer{}
	w.U8(1)
	w.U32(uint32(len(p.Steps)))
	for _, s := range p.Steps {
		w.Bytes32([]byte(s.ID))
		w.U32(uint32(len(s.DependsOn)))
		for _, d := range s.DependsOn {
			w.Bytes32([]byte(d))
		}
		w.U32(uint32(len(s.Inputs)))
		for _, b := range s.Inputs {
			w.Bytes32([]byte(b.Name))
			if b.Step != "" {
				w.U8(sourceStep)
				w.Bytes32([]byte(b.Step))
				w.Bytes32([]byte(b.Output))
			} else {
				w.U8(sourceArtifact)
				w.Buf = asl.AppendEncodedRef(w.Buf, b.Ref)
			}
		}
		w.U8(uint8(s.Kind))
		switch s.Kind {
		case PELStep:
			w.Buf = asl.AppendEncodedRef(w.Buf, s.Program)
			w.Buf = asl.AppendOptionalEncodedRef(w.Buf, s.Params, s.HasParams)
		case EffectStep:
			w.Bytes32([]byte(s.Effect))
			w.Bytes32(s.EffectParams)
			w.U8(uint8(s.Class))
			w.U8(uint8(s.Gate))
			w.U32(s.Retry.MaxAttempts)
			w.U32(s.Retry.BaseMillis)
			w.U32(s.Retry.CapMillis)
			w.U8(uint8(s.Cache))
			w.Bytes32([]byte(s.KeyTemplate))
		}
	}
	return w.Buf
}

// stepOffsets records where each field of one decoded step starts, so that
// a rule checked after the whole plan is read (checkPlan) is reported at
// its field's offset.
type stepOffsets struct {
	id, kind                     int
	deps                         []int
	inName, inStep, inOut, inRef []int
	program, params              int
	effect, eparams, class, gate int
	maxAttempts, base, cap       int
	cache, key                   int
}

// DecodePlan parses PlanBytes under the rules of SPECS.md §22.2. An error
// is an *enc.DecodeError (wrapping enc.ErrMalformed) naming the field and
// the offset at which it starts. Every accepted plan satisfies Validate,
// and Encode gives back b.
func DecodePlan(b []byte) (Plan, error) {
	r := enc.NewReader(b)
	if err := checkVersion(r); err != nil {
		return Plan{}, err
	}
	n := r.Count("step_count", minStep)
	if r.Err() != nil {
		return Plan{}, r.Err()
	}
	p := Plan{Steps: make([]Step, 0, n)}
	offs := make([]stepOffsets, 0, n)
	for i := 0; i < n; i++ {
		var s Step
		var o stepOffsets
		o.id = r.Offset()
		s.ID = string(r.Bytes32("step.id"))
		if r.Err() != nil {
			return Plan{}, r.Err()
		}
		if i > 0 && p.Steps[i-1].ID >= s.ID {
			return Plan{}, r.FailAt(o.id, "step.id", "%q is not after %q (step ids are unique and sorted bytewise)", s.ID, p.Steps[i-1].ID)
		}
		nd := r.Count("step.depends_on_count", minDep)
		if r.Err() != nil {
			return Plan{}, r.Err()
		}
		for j := 0; j < nd; j++ {
			off := r.Offset()
			d := string(r.Bytes32("step.depends_on"))
			if r.Err() != nil {
				return Plan{}, r.Err()
			}
			if j > 0 && s.DependsOn[j-1] >= d {
				return Plan{}, r.FailAt(off, "step.depends_on", "%q is not after %q (depends_on is sorted and has no duplicates)", d, s.DependsOn[j-1])
			}
			s.DependsOn = append(s.DependsOn, d)
			o.deps = append(o.deps, off)
		}
		ni := r.Count("step.input_count", minBinding)
		if r.Err() != nil {
			return Plan{}, r.Err()
		}
		for j := 0; j < ni; j++ {
			var bd Binding
			off := r.Offset()
			bd.Name = string(r.Bytes32("step.input.name"))
			if r.Err() != nil {
				return Plan{}, r.Err()
			}
			if j > 0 && s.Inputs[j-1].Name >= bd.Name {
				return Plan{}, r.FailAt(off, "step.input.name", "%q is not after %q (input names are unique and sorted bytewise)", bd.Name, s.Inputs[j-1].Name)
			}
			o.inName = append(o.inName, off)
			src, err := readFlag(r, "step.input.source", func(v uint8) bool { return v == sourceArtifact || v == sourceStep })
			if err != nil {
				return Plan{}, err
			}
			o.inRef = append(o.inRef, r.Offset())
			if src == sourceArtifact {
				o.inStep = append(o.inStep, r.Offset())
				o.inOut = append(o.inOut, r.Offset())
				if bd.Ref, err = asl.ReadEncodedRef(r, "step.input.ref"); err != nil {
					return Plan{}, err
				}
			} else {
				o.inStep = append(o.inStep, r.Offset())
				bd.Step = string(r.Bytes32("step.input.step"))
				o.inOut = append(o.inOut, r.Offset())
				bd.Output = string(r.Bytes32("step.input.output"))
				if r.Err() != nil {
					return Plan{}, r.Err()
				}
			}
			s.Inputs = append(s.Inputs, bd)
		}
		o.kind = r.Offset()
		k, err := readFlag(r, "step.kind", func(v uint8) bool { return v == uint8(PELStep) || v == uint8(EffectStep) })
		if err != nil {
			return Plan{}, err
		}
		s.Kind = StepKind(k)
		if s.Kind == PELStep {
			o.program = r.Offset()
			if s.Program, err = asl.ReadEncodedRef(r, "step.program"); err != nil {
				return Plan{}, err
			}
			o.params = r.Offset()
			if s.Params, s.HasParams, err = asl.ReadOptionalEncodedRef(r, "step.params"); err != nil {
				return Plan{}, err
			}
		} else {
			o.effect = r.Offset()
			s.Effect = string(r.Bytes32("step.effect.kind"))
			o.eparams = r.Offset()
			if pb := r.Bytes32("step.effect.params"); r.Err() == nil {
				s.EffectParams = []byte(string(pb))
			}
			if r.Err() != nil {
				return Plan{}, r.Err()
			}
			o.class = r.Offset()
			c, err := readFlag(r, "step.effect.class", validEffectClass)
			if err != nil {
				return Plan{}, err
			}
			s.Class = effectClass(c)
			o.gate = r.Offset()
			g, err := readFlag(r, "step.effect.gate", func(v uint8) bool { return v == uint8(GateNone) || v == uint8(GateApproval) })
			if err != nil {
				return Plan{}, err
			}
			s.Gate = Gate(g)
			o.maxAttempts = r.Offset()
			s.Retry.MaxAttempts = r.U32("step.effect.retry.max_attempts")
			o.base = r.Offset()
			s.Retry.BaseMillis = r.U32("step.effect.retry.base_ms")
			o.cap = r.Offset()
			s.Retry.CapMillis = r.U32("step.effect.retry.cap_ms")
			if r.Err() != nil {
				return Plan{}, r.Err()
			}
			o.cache = r.Offset()
			cp, err := readFlag(r, "step.effect.cache", func(v uint8) bool { return v == uint8(CacheNone) || v == uint8(CacheReuse) })
			if err != nil {
				return Plan{}, err
			}
			s.Cache = CachePolicy(cp)
			o.key = r.Offset()
			s.KeyTemplate = string(r.Bytes32("step.effect.key"))
			if r.Err() != nil {
				return Plan{}, r.Err()
			}
		}
		p.Steps = append(p.Steps, s)
		offs = append(offs, o)
	}
	if err := r.Done(); err != nil {
		return Plan{}, err
	}
	if is := checkPlan(p); is != nil {
		off := is.offset(offs)
		return Plan{}, r.FailAt(off, is.field, "step %q: %s", p.Steps[is.step].ID, is.msg)
	}
	return p, nil
}

// DecodePlanArtifact decodes a PLAN/1 artifact; another tag is refused
// with ErrWrongTag.
func DecodePlanArtifact(a asl.Artifact) (Plan, error) {
	b, err := artifactBytes(a, TagPlan, "plan")
	if err != nil {
		return Plan{}, err
	}
	return DecodePlan(b)
}

// Refs returns the references a plan contributes to reachability
// (SPECS.md §19.6), in step order: each PEL step's program and params
// (when present), then every step's inputs bound to artifacts, in input
// order.
func (p Plan) Refs() []asl.Reference {
	var out []asl.Reference
	for _, s := range p.Steps {
		if s.Kind == PELStep {
			out = append(out, s.Program)
			if s.HasParams {
				out = append(out, s.Params)
			}
		}
		for _, b := range s.Inputs {
			if b.Step == "" {
				out = append(out, b.Ref)
			}
		}
	}
	return out
}
