package conformance

import (
	"fmt"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/plan"
	"github.com/amduat/amduat/plan/effect"
)

// Generated differential cases for the plan layer's kinds (SPECS.md
// §21.6, §22.11): random plans, keys, requests, receipts, submissions and
// events, valid most of the time, and their encodings, half of them
// mutated.

func init() {
	genTable = append(genTable,
		caseGen{"plan", KindPlanBuild, func(g *CaseGenerator) (any, error) {
			text := string(g.plan().JSON())
			if g.chance(2) {
				text = g.mutateText(text)
			}
			return planBuildInput{PlanJSON: ptr(text)}, nil
		}},
		caseGen{"plan", KindPlanDecode, func(g *CaseGenerator) (any, error) {
			b, err := g.plan().Encode()
			if err != nil {
				return nil, errRetry
			}
			return bytesVec{PlanBytes: ptr(Hex(g.maybeMutate(b)))}, nil
		}},
		caseGen{"plan", KindEffectKey, func(g *CaseGenerator) (any, error) {
			tmpl := ""
			if g.chance(2) {
				tmpl = g.keyTemplate([]string{"a", "b"})
			}
			return effectKeyInput{Effect: g.ident(), EffectParams: g.params(), Step: g.ident(), KeyTemplate: tmpl,
				PlanRef: g.ref().String(), NamedInputs: inputsToVec(g.inputs())}, nil
		}},
		caseGen{"plan.receipt", KindEffectRequestEncode, func(g *CaseGenerator) (any, error) {
			return requestToVec(g.effectRequest()), nil
		}},
		caseGen{"plan.receipt", KindEffectRequestDecode, func(g *CaseGenerator) (any, error) {
			b, err := g.effectRequest().Encode()
			if err != nil {
				return nil, errRetry
			}
			return bytesVec{RequestBytes: ptr(Hex(g.maybeMutate(b)))}, nil
		}},
		caseGen{"plan.receipt", KindReceiptEncode, func(g *CaseGenerator) (any, error) {
			return receiptToVec(g.receipt()), nil
		}},
		caseGen{"plan.receipt", KindReceiptDecode, func(g *CaseGenerator) (any, error) {
			b, err := g.receipt().Encode()
			if err != nil {
				return nil, errRetry
			}
			return bytesVec{ReceiptBytes: ptr(Hex(g.maybeMutate(b)))}, nil
		}},
		caseGen{"plan.event", KindSubmissionEncode, func(g *CaseGenerator) (any, error) {
			return submissionToVec(g.submission()), nil
		}},
		caseGen{"plan.event", KindSubmissionDecode, func(g *CaseGenerator) (any, error) {
			b, err := g.submission().Encode()
			if err != nil {
				return nil, errRetry
			}
			return bytesVec{SubmissionBytes: ptr(Hex(g.maybeMutate(b)))}, nil
		}},
		caseGen{"plan.event", KindPlanEventEncode, func(g *CaseGenerator) (any, error) {
			return eventToVec(g.event()), nil
		}},
		caseGen{"plan.event", KindPlanEventDecode, func(g *CaseGenerator) (any, error) {
			b, err := g.event().Encode()
			if err != nil {
				return nil, errRetry
			}
			return bytesVec{EventBytes: ptr(Hex(g.maybeMutate(b)))}, nil
		}},
	)
}

// ident draws an identifier, now and then one §22.1 refuses.
func (g *CaseGenerator) ident() string {
	names := []string{"a", "b", "fetch", "count", "send", "http", "exec", "x.y", "A-Z_0", "..", "a b", ""}
	if g.chance(20) {
		return names[len(names)-3+g.rng.IntN(3)]
	}
	return names[g.rng.IntN(len(names)-3)]
}

// params draws canonical effect params, rarely not canonical.
func (g *CaseGenerator) params() string {
	ps := []string{`{}`, `{"url":"http://127.0.0.1/doc"}`, `{"argv":["wc","-w"],"env":{}}`, `{"a":[1,2.50,-0,1e3,true,null],"b":"\u00e9\n"}`}
	if g.chance(20) {
		return `{"b":1,"a":2}`
	}
	return ps[g.rng.IntN(len(ps))]
}

func (g *CaseGenerator) keyTemplate(inputs []string) string {
	parts := []string{"{kind}", "{step}", "{plan}", "{params}", "{derived}", "lit", "{{", "}}", ":"}
	for _, in := range inputs {
		parts = append(parts, "{input:"+in+"}")
	}
	var s string
	for range 1 + g.rng.IntN(4) {
		s += parts[g.rng.IntN(len(parts))]
	}
	if g.chance(15) {
		s += []string{"{", "}", "{nope}", "\n"}[g.rng.IntN(4)]
	}
	return s
}

func (g *CaseGenerator) inputs() []effect.Input {
	var out []effect.Input
	for i := range g.rng.IntN(4) {
		out = append(out, effect.Input{Name: string(rune('a' + i)), Ref: g.ref()})
	}
	return out
}

// plan draws a plan of up to five steps, each depending on earlier ones
// (now and then on a later one, which may close a cycle).
func (g *CaseGenerator) plan() plan.Plan {
	ids := []string{"s0", "s1", "s2", "s3", "s4"}
	n := g.rng.IntN(6)
	var p plan.Plan
	for i := range n {
		s := plan.Step{ID: ids[i]}
		for j := range i {
			if g.chance(3) {
				s.DependsOn = append(s.DependsOn, ids[j])
			}
		}
		if g.chance(25) {
			s.DependsOn = append(s.DependsOn, ids[g.rng.IntN(n)])
		}
		if g.chance(2) {
			s.Kind = plan.PELStep
			s.Program = g.ref()
			if g.chance(3) {
				s.Params, s.HasParams = g.ref(), true
			}
			for k := range g.rng.IntN(3) {
				b := plan.Binding{Name: fmt.Sprint(k)}
				if i > 0 && g.chance(2) {
					src := g.rng.IntN(i)
					b.Step = ids[src]
					b.Output = "0"
				} else {
					b.Ref = g.ref()
				}
				s.Inputs = append(s.Inputs, b)
			}
		} else {
			s.Kind = plan.EffectStep
			s.Effect = g.ident()
			s.EffectParams = []byte(g.params())
			s.Class = effect.Class(1 + g.rng.IntN(3))
			s.Gate = plan.Gate(1 + g.rng.IntN(2))
			s.Retry = plan.RetryPolicy{MaxAttempts: uint32(1 + g.rng.IntN(5)), BaseMillis: uint32(g.rng.IntN(500))}
			s.Retry.CapMillis = s.Retry.BaseMillis + uint32(g.rng.IntN(10000))
			s.Cache = plan.CachePolicy(1 + g.rng.IntN(2))
			var names []string
			for k := range g.rng.IntN(3) {
				b := plan.Binding{Name: []string{"doc", "body", "cfg"}[k], Ref: g.ref()}
				if i > 0 && g.chance(2) {
					b.Ref, b.Step, b.Output = asl.Reference{}, ids[g.rng.IntN(i)], "0"
				}
				s.Inputs = append(s.Inputs, b)
				names = append(names, b.Name)
			}
			if g.chance(3) {
				s.KeyTemplate = g.keyTemplate(names)
			}
		}
		p.Steps = append(p.Steps, s)
	}
	return p
}

func (g *CaseGenerator) effectRequest() plan.EffectRequest {
	key := "k-" + g.ident()
	if g.chance(20) {
		key = ""
	}
	return plan.EffectRequest{Kind: g.ident(), Params: []byte(g.params()), Inputs: g.inputs(), Key: key}
}

var errorClasses = []effect.ErrorClass{0, effect.NetworkTimeout, effect.RateLimited, effect.ProviderUnavailable, effect.DependencyUnavailable,
	effect.PolicyDenied, effect.InvalidInput, effect.AuthForbidden, effect.LimitExceeded, effect.ExecutorFault}

// receipt draws a receipt obeying the rules of §22.7 most of the time.
func (g *CaseGenerator) receipt() plan.Receipt {
	r := plan.Receipt{Kind: plan.ReceiptKind(1 + g.rng.IntN(3)), Plan: g.ref(), Execution: g.ref(), Step: g.ident(), Effect: g.ident(),
		Request: g.ref(), Key: "key-" + g.ident(), Start: int64(g.rng.Uint64()), End: int64(g.rng.Uint64())}
	if r.Kind == plan.AttemptReceipt {
		r.Attempt = uint32(1 + g.rng.IntN(5))
		r.Outcome = plan.Outcome(1 + g.rng.IntN(4))
		switch r.Outcome {
		case plan.FailedRetryable:
			r.ErrorClass = errorClasses[1+g.rng.IntN(4)]
		case plan.FailedFinal:
			r.ErrorClass = errorClasses[1+g.rng.IntN(9)]
		}
		r.Executor, r.ExecutorVersion = g.ident(), "v1"
		for i, o := range g.inputs() {
			r.Outputs = append(r.Outputs, effect.Output{Name: []string{"body", "headers", "status"}[i%3], Ref: o.Ref})
		}
	} else {
		r.Actor = []string{"alice", "bob"}[g.rng.IntN(2)]
	}
	if g.chance(10) {
		r.ErrorClass = errorClasses[g.rng.IntN(len(errorClasses))]
	}
	if g.chance(20) {
		r.Attempt = uint32(g.rng.IntN(2))
	}
	if g.chance(5) {
		r.Message = []string{"HTTP 429", "line 1\nline 2", "\u00e9"}[g.rng.IntN(3)]
	}
	return r
}

func (g *CaseGenerator) submission() plan.Submission {
	s := plan.Submission{Plan: g.ref(), Mode: plan.Mode(1 + g.rng.IntN(4)), Inputs: g.inputs()}
	if g.chance(4) {
		s.Label = []string{"again", "run 2", "x\n"}[g.rng.IntN(3)]
	}
	return s
}

// event draws an event obeying the rules of §22.9 most of the time.
func (g *CaseGenerator) event() plan.Event {
	e := plan.Event{Execution: g.ref(), Seq: 1 + uint64(g.rng.IntN(1000)), Type: plan.EventType(1 + g.rng.IntN(16)), Time: int64(g.rng.Uint64())}
	if g.chance(8) {
		e.Seq = g.rng.Uint64()
	}
	if e.Type == plan.EventSubmitted {
		e.Seq = 1
	}
	if e.Seq > 1 || g.chance(20) {
		e.Parent = g.ref()
	}
	if !e.Type.PlanLevel() || g.chance(20) {
		e.Step = g.ident()
	}
	switch e.Type {
	case plan.EventStepFailed:
		e.ErrorClass = errorClasses[1+g.rng.IntN(9)]
	case plan.EventRetryScheduled:
		e.ErrorClass = errorClasses[1+g.rng.IntN(4)]
	}
	if g.chance(3) {
		e.Receipt = g.ref()
	}
	if g.chance(3) {
		for i, o := range g.inputs() {
			e.Outputs = append(e.Outputs, effect.Output{Name: []string{"0", "body", "status"}[i%3], Ref: o.Ref})
		}
	}
	if g.chance(4) {
		e.Attempt = uint32(g.rng.IntN(4))
	}
	if g.chance(4) {
		e.Actor = "alice"
	}
	if g.chance(4) {
		e.Reason = "blocked on send"
	}
	return e
}
