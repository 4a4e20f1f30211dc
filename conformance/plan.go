package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/plan"
	"github.com/amduat/amduat/plan/effect"
)

// Kinds for the plan layer's encodings (SPECS.md §22.11): PLAN/1, the
// effect key, EFFECT-REQUEST/1, RECEIPT/1, SUBMISSION/1 and PLAN-EVENT/1.
// Each check asks this implementation's solver for its answer and
// compares it with the expect member in the canonical form of §21.3; a
// decode solver also re-encodes what it accepts and fails unless it gets
// the input back.
const (
	// plan_build: {"plan_json": text} -> {"plan_bytes": hex, "reference":
	// text} (tag 0x80000002, SHA-256) or {"reject": {"field": "plan"}}.
	KindPlanBuild = "plan_build"
	// plan_decode: {"plan_bytes": hex} -> {"plan_form": the JSON form} or a
	// rejection {"field", "offset"}.
	KindPlanDecode = "plan_decode"
	// effect_key: {"effect", "effect_params", "step", "key_template",
	// "plan_ref", "named_inputs"} -> {"idempotency_key": text} or
	// {"reject": {"field": "key_template"}}.
	KindEffectKey = "effect_key"
	// effect_request_encode / _decode: an EffectRequest value <-> bytes.
	KindEffectRequestEncode = "effect_request_encode"
	KindEffectRequestDecode = "effect_request_decode"
	// receipt_encode / _decode.
	KindReceiptEncode = "receipt_encode"
	KindReceiptDecode = "receipt_decode"
	// submission_encode / _decode: the reference is the execution id.
	KindSubmissionEncode = "submission_encode"
	KindSubmissionDecode = "submission_decode"
	// plan_event_encode / _decode.
	KindPlanEventEncode = "plan_event_encode"
	KindPlanEventDecode = "plan_event_decode"

	specPlan = "§22"
)

func init() {
	for _, k := range []string{KindPlanBuild, KindPlanDecode, KindEffectKey, KindEffectRequestEncode, KindEffectRequestDecode,
		KindReceiptEncode, KindReceiptDecode, KindSubmissionEncode, KindSubmissionDecode, KindPlanEventEncode, KindPlanEventDecode} {
		Register(k, checkBySolver)
	}
	registerSolver(KindPlanBuild, solve1(solvePlanBuild))
	registerSolver(KindPlanDecode, solve1(solvePlanDecode))
	registerSolver(KindEffectKey, solve1(solveEffectKey))
	registerSolver(KindEffectRequestEncode, solve1(func(_ context.Context, in effectRequestVec) (any, error) {
		q, err := in.value()
		if err != nil {
			return nil, err
		}
		return encodeAnswer("request_bytes", "effect request", plan.TagEffectRequest, q.Encode)
	}))
	registerSolver(KindEffectRequestDecode, solve1(func(_ context.Context, in bytesVec) (any, error) {
		return decodeAnswer(in.RequestBytes, "request_bytes", plan.DecodeEffectRequest, plan.EffectRequest.Encode, requestToVec)
	}))
	registerSolver(KindReceiptEncode, solve1(func(_ context.Context, in receiptVec) (any, error) {
		r, err := in.value()
		if err != nil {
			return nil, err
		}
		return encodeAnswer("receipt_bytes", "receipt", plan.TagReceipt, r.Encode)
	}))
	registerSolver(KindReceiptDecode, solve1(func(_ context.Context, in bytesVec) (any, error) {
		return decodeAnswer(in.ReceiptBytes, "receipt_bytes", plan.DecodeReceipt, plan.Receipt.Encode, receiptToVec)
	}))
	registerSolver(KindSubmissionEncode, solve1(func(_ context.Context, in submissionVec) (any, error) {
		s, err := in.value()
		if err != nil {
			return nil, err
		}
		return encodeAnswer("submission_bytes", "submission", plan.TagSubmission, s.Encode)
	}))
	registerSolver(KindSubmissionDecode, solve1(func(_ context.Context, in bytesVec) (any, error) {
		return decodeAnswer(in.SubmissionBytes, "submission_bytes", plan.DecodeSubmission, plan.Submission.Encode, submissionToVec)
	}))
	registerSolver(KindPlanEventEncode, solve1(func(_ context.Context, in eventVec) (any, error) {
		e, err := in.value()
		if err != nil {
			return nil, err
		}
		return encodeAnswer("event_bytes", "event", plan.TagEvent, e.Encode)
	}))
	registerSolver(KindPlanEventDecode, solve1(func(_ context.Context, in bytesVec) (any, error) {
		return decodeAnswer(in.EventBytes, "event_bytes", plan.DecodeEvent, plan.Event.Encode, eventToVec)
	}))
}

// checkBySolver compares this implementation's answer to v's input with
// v's expect in canonical form (§21.3).
func checkBySolver(ctx context.Context, v Vector) error {
	ans, err := Solve(ctx, v.Kind, v.Input)
	if err != nil {
		return err
	}
	got, err := MarshalJSON(ans)
	if err != nil {
		return err
	}
	cg, err := CanonicalJSON(got)
	if err != nil {
		return err
	}
	cw, err := CanonicalJSON(v.Expect)
	if err != nil {
		return fmt.Errorf("bad vector expect: %w", err)
	}
	if !bytes.Equal(cg, cw) {
		return errors.New(describeDiff(cg, cw))
	}
	return nil
}

// bytesVec is the input of every decode kind: exactly one member is set.
type bytesVec struct {
	PlanBytes       *Hex `json:"plan_bytes,omitempty"`
	RequestBytes    *Hex `json:"request_bytes,omitempty"`
	ReceiptBytes    *Hex `json:"receipt_bytes,omitempty"`
	SubmissionBytes *Hex `json:"submission_bytes,omitempty"`
	EventBytes      *Hex `json:"event_bytes,omitempty"`
}

// encodeAnswer encodes with enc and answers {member: hex, "reference":
// text} (SHA-256 of the artifact tagged tag), or a rejection naming what
// the encoder refuses.
func encodeAnswer(member, what string, tag asl.TypeTag, enc func() ([]byte, error)) (any, error) {
	b, err := enc()
	if err != nil {
		if errors.Is(err, plan.ErrInvalidRecord) || errors.Is(err, plan.ErrInvalidPlan) {
			return rejectExpect{&Reject{Field: what}}, nil
		}
		return nil, err
	}
	return map[string]any{member: Hex(b), "reference": asl.MustDerive(asl.HashSHA256, asl.Tagged(tag, b)).String()}, nil
}

// decodeAnswer decodes b, re-encodes what it accepts (which must give b
// back) and answers the value in vector form, or a rejection.
func decodeAnswer[T any, V any](b *Hex, member string, dec func([]byte) (T, error), enc func(T) ([]byte, error), toVec func(T) V) (any, error) {
	if err := needIn(member, b != nil); err != nil {
		return nil, err
	}
	x, err := dec(*b)
	if err != nil {
		return rejectExpect{RejectOf(err, "")}, nil
	}
	again, err := enc(x)
	if err != nil {
		return nil, fmt.Errorf("accepted %s does not re-encode: %w", member, err)
	}
	if !bytes.Equal(again, *b) {
		return nil, fmt.Errorf("accepted %s re-encodes to %x", member, again)
	}
	return toVec(x), nil
}

// Plans.

type planBuildInput struct {
	PlanJSON *string `json:"plan_json"`
}

func solvePlanBuild(_ context.Context, in planBuildInput) (any, error) {
	if err := needIn("plan_json", in.PlanJSON != nil); err != nil {
		return nil, err
	}
	p, err := plan.Build([]byte(*in.PlanJSON))
	if err != nil {
		return rejectExpect{&Reject{Field: "plan"}}, nil
	}
	return encodeAnswer("plan_bytes", "plan", plan.TagPlan, p.Encode)
}

type planDecodeExpect struct {
	PlanForm json.RawMessage `json:"plan_form"`
}

func solvePlanDecode(_ context.Context, in bytesVec) (any, error) {
	return decodeAnswer(in.PlanBytes, "plan_bytes", plan.DecodePlan, plan.Plan.Encode, func(p plan.Plan) planDecodeExpect {
		return planDecodeExpect{PlanForm: json.RawMessage(p.JSON())}
	})
}

// Effect keys.

type effectKeyInput struct {
	Effect       string            `json:"effect"`
	EffectParams string            `json:"effect_params"`
	Step         string            `json:"step"`
	KeyTemplate  string            `json:"key_template"`
	PlanRef      string            `json:"plan_ref"`
	NamedInputs  map[string]string `json:"named_inputs"`
}

type effectKeyExpect struct {
	IdempotencyKey string `json:"idempotency_key"`
}

func solveEffectKey(_ context.Context, in effectKeyInput) (any, error) {
	ins, err := inputsFromVec(in.NamedInputs)
	if err != nil {
		return nil, err
	}
	planRef, err := asl.ParseReference(in.PlanRef)
	if err != nil {
		return nil, fmt.Errorf("bad input: plan_ref: %w", err)
	}
	s := plan.Step{ID: in.Step, Kind: plan.EffectStep, Effect: in.Effect, EffectParams: []byte(in.EffectParams), KeyTemplate: in.KeyTemplate}
	for _, x := range ins {
		s.Inputs = append(s.Inputs, plan.Binding{Name: x.Name, Ref: x.Ref})
	}
	if in.KeyTemplate != "" {
		if err := plan.CheckKeyTemplate(in.KeyTemplate, s.Inputs); err != nil {
			return rejectExpect{&Reject{Field: "key_template"}}, nil
		}
	}
	k, err := plan.StepKey(s, planRef, ins)
	if err != nil {
		return rejectExpect{&Reject{Field: "key_template"}}, nil
	}
	return effectKeyExpect{IdempotencyKey: k}, nil
}

// Named references: an object from name to reference text (§22.11).

func inputsFromVec(m map[string]string) ([]effect.Input, error) {
	var out []effect.Input
	for _, name := range sortedKeys(m) {
		r, err := asl.ParseReference(m[name])
		if err != nil {
			return nil, fmt.Errorf("bad input: %q: %w", name, err)
		}
		out = append(out, effect.Input{Name: name, Ref: r})
	}
	return out, nil
}

func outputsFromVec(m map[string]string) ([]effect.Output, error) {
	ins, err := inputsFromVec(m)
	out := make([]effect.Output, len(ins))
	for i, x := range ins {
		out[i] = effect.Output(x)
	}
	return out, err
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func inputsToVec(in []effect.Input) map[string]string {
	m := map[string]string{}
	for _, x := range in {
		m[x.Name] = x.Ref.String()
	}
	return m
}

func outputsToVec(in []effect.Output) map[string]string {
	m := map[string]string{}
	for _, x := range in {
		m[x.Name] = x.Ref.String()
	}
	return m
}

func parseRefVec(member, s string) (asl.Reference, error) {
	r, err := asl.ParseReference(s)
	if err != nil {
		return r, fmt.Errorf("bad input: %s: %w", member, err)
	}
	return r, nil
}

func optRefToVec(r asl.Reference) *string {
	if r.IsZero() {
		return nil
	}
	s := r.String()
	return &s
}

func optRefFromVec(member string, s *string) (asl.Reference, error) {
	if s == nil {
		return asl.Reference{}, nil
	}
	return parseRefVec(member, *s)
}

// enumName and enumValue map the names of §22.11 to values; value 0 is
// "none" for the members that allow it.
func enumValue[T ~uint8](member, name string, max T, str func(T) string, none bool) (T, error) {
	if none && name == "none" {
		return 0, nil
	}
	for v := T(1); v <= max; v++ {
		if str(v) == name {
			return v, nil
		}
	}
	return 0, fmt.Errorf("bad input: %s: unknown name %q", member, name)
}

func errorClassName(c effect.ErrorClass) string {
	if c == 0 {
		return "none"
	}
	return c.String()
}

func outcomeName(o plan.Outcome) string {
	if o == 0 {
		return "none"
	}
	return o.String()
}

// Effect requests.

type effectRequestVec struct {
	Effect         string            `json:"effect"`
	EffectParams   string            `json:"effect_params"`
	NamedInputs    map[string]string `json:"named_inputs"`
	IdempotencyKey string            `json:"idempotency_key"`
}

func (v effectRequestVec) value() (plan.EffectRequest, error) {
	ins, err := inputsFromVec(v.NamedInputs)
	return plan.EffectRequest{Kind: v.Effect, Params: []byte(v.EffectParams), Inputs: ins, Key: v.IdempotencyKey}, err
}

func requestToVec(q plan.EffectRequest) effectRequestVec {
	return effectRequestVec{Effect: q.Kind, EffectParams: string(q.Params), NamedInputs: inputsToVec(q.Inputs), IdempotencyKey: q.Key}
}

// Receipts.

type receiptVec struct {
	ReceiptKind     string            `json:"receipt_kind"`
	PlanRef         string            `json:"plan_ref"`
	ExecutionRef    string            `json:"execution_ref"`
	Step            string            `json:"step"`
	Effect          string            `json:"effect"`
	RequestRef      string            `json:"request_ref"`
	IdempotencyKey  string            `json:"idempotency_key"`
	Attempt         uint32            `json:"attempt"`
	Outcome         string            `json:"outcome"`
	ErrorClass      string            `json:"error_class"`
	Message         string            `json:"message"`
	NamedOutputs    map[string]string `json:"named_outputs"`
	Executor        string            `json:"executor"`
	ExecutorVersion string            `json:"executor_version"`
	Start           int64             `json:"start"`
	End             int64             `json:"end"`
	Actor           string            `json:"actor"`
}

func (v receiptVec) value() (plan.Receipt, error) {
	var r plan.Receipt
	var err error
	if r.Kind, err = enumValue("receipt_kind", v.ReceiptKind, plan.RejectReceipt, plan.ReceiptKind.String, false); err != nil {
		return r, err
	}
	if r.Plan, err = parseRefVec("plan_ref", v.PlanRef); err != nil {
		return r, err
	}
	if r.Execution, err = parseRefVec("execution_ref", v.ExecutionRef); err != nil {
		return r, err
	}
	if r.Request, err = parseRefVec("request_ref", v.RequestRef); err != nil {
		return r, err
	}
	if r.Outcome, err = enumValue("outcome", v.Outcome, plan.UnknownOutcome, plan.Outcome.String, true); err != nil {
		return r, err
	}
	if r.ErrorClass, err = enumValue("error_class", v.ErrorClass, effect.ExecutorFault, effect.ErrorClass.String, true); err != nil {
		return r, err
	}
	if r.Outputs, err = outputsFromVec(v.NamedOutputs); err != nil {
		return r, err
	}
	r.Step, r.Effect, r.Key, r.Attempt, r.Message = v.Step, v.Effect, v.IdempotencyKey, v.Attempt, v.Message
	r.Executor, r.ExecutorVersion, r.Start, r.End, r.Actor = v.Executor, v.ExecutorVersion, v.Start, v.End, v.Actor
	return r, nil
}

func receiptToVec(r plan.Receipt) receiptVec {
	return receiptVec{ReceiptKind: r.Kind.String(), PlanRef: r.Plan.String(), ExecutionRef: r.Execution.String(), Step: r.Step,
		Effect: r.Effect, RequestRef: r.Request.String(), IdempotencyKey: r.Key, Attempt: r.Attempt, Outcome: outcomeName(r.Outcome),
		ErrorClass: errorClassName(r.ErrorClass), Message: r.Message, NamedOutputs: outputsToVec(r.Outputs), Executor: r.Executor,
		ExecutorVersion: r.ExecutorVersion, Start: r.Start, End: r.End, Actor: r.Actor}
}

// Submissions.

type submissionVec struct {
	PlanRef     string            `json:"plan_ref"`
	Mode        string            `json:"mode"`
	NamedInputs map[string]string `json:"named_inputs"`
	Label       string            `json:"label"`
}

func (v submissionVec) value() (plan.Submission, error) {
	var s plan.Submission
	var err error
	if s.Plan, err = parseRefVec("plan_ref", v.PlanRef); err != nil {
		return s, err
	}
	if s.Mode, err = enumValue("mode", v.Mode, plan.Auto, plan.Mode.String, false); err != nil {
		return s, err
	}
	s.Inputs, err = inputsFromVec(v.NamedInputs)
	s.Label = v.Label
	return s, err
}

func submissionToVec(s plan.Submission) submissionVec {
	return submissionVec{PlanRef: s.Plan.String(), Mode: s.Mode.String(), NamedInputs: inputsToVec(s.Inputs), Label: s.Label}
}

// Events.

type eventVec struct {
	ExecutionRef string            `json:"execution_ref"`
	Seq          uint64            `json:"seq"`
	ParentRef    *string           `json:"parent_ref"`
	EventType    string            `json:"event_type"`
	Step         string            `json:"step"`
	Attempt      uint32            `json:"attempt"`
	ReceiptRef   *string           `json:"receipt_ref"`
	NamedOutputs map[string]string `json:"named_outputs"`
	ErrorClass   string            `json:"error_class"`
	Reason       string            `json:"reason"`
	Actor        string            `json:"actor"`
	Time         int64             `json:"time"`
}

func (v eventVec) value() (plan.Event, error) {
	var e plan.Event
	var err error
	if e.Execution, err = parseRefVec("execution_ref", v.ExecutionRef); err != nil {
		return e, err
	}
	if e.Parent, err = optRefFromVec("parent_ref", v.ParentRef); err != nil {
		return e, err
	}
	if e.Receipt, err = optRefFromVec("receipt_ref", v.ReceiptRef); err != nil {
		return e, err
	}
	if e.Type, err = enumValue("event_type", v.EventType, plan.EventResumed, plan.EventType.String, false); err != nil {
		return e, err
	}
	if e.ErrorClass, err = enumValue("error_class", v.ErrorClass, effect.ExecutorFault, effect.ErrorClass.String, true); err != nil {
		return e, err
	}
	if e.Outputs, err = outputsFromVec(v.NamedOutputs); err != nil {
		return e, err
	}
	e.Seq, e.Step, e.Attempt, e.Reason, e.Actor, e.Time = v.Seq, v.Step, v.Attempt, v.Reason, v.Actor, v.Time
	return e, nil
}

func eventToVec(e plan.Event) eventVec {
	return eventVec{ExecutionRef: e.Execution.String(), Seq: e.Seq, ParentRef: optRefToVec(e.Parent), EventType: e.Type.String(),
		Step: e.Step, Attempt: e.Attempt, ReceiptRef: optRefToVec(e.Receipt), NamedOutputs: outputsToVec(e.Outputs),
		ErrorClass: errorClassName(e.ErrorClass), Reason: e.Reason, Actor: e.Actor, Time: e.Time}
}
