package conformance

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/plan"
)

// The vector files of the plan layer (SPECS.md §22.11): plan.json (plans
// and effect keys), plan.receipt.json (effect requests and receipts),
// plan.event.json (submissions and ledger events).

func init() {
	RegisterGenerator("plan", genPlan)
	RegisterGenerator("plan.receipt", genPlanReceipt)
	RegisterGenerator("plan.event", genPlanEvent)
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// setAt returns a copy of b with v written at off.
func setAt(b []byte, off int, v ...byte) []byte {
	out := cat(b)
	copy(out[off:], v)
	return out
}

func rawStr(s string) []byte { return rawBytes32([]byte(s)) }

func rawRef(r asl.Reference) []byte { return asl.AppendEncodedRef(nil, r) }

func rawOptRef(r *asl.Reference) []byte {
	if r == nil {
		return []byte{0}
	}
	return cat([]byte{1}, rawRef(*r))
}

// rawNamed writes a list of name ‖ EncodedRef in the order given.
func rawNamed(names []string, refs ...asl.Reference) []byte {
	b := u32(uint32(len(names)))
	for i, n := range names {
		b = cat(b, rawStr(n), rawRef(refs[i]))
	}
	return b
}

var (
	// refConstSeed is the seed program `const` of §9.3.
	refConstSeed = asl.MustParseReference("00011b2564b4c0314239dfe740c4d10ee7e4f380aa19d20510982becfeb1a01b5580")
	refBlake     = asl.MustDerive(asl.HashBLAKE3, asl.Untagged([]byte("b")))
	refUnknown   = func() asl.Reference { r, _ := asl.DecodeReference([]byte{0x77, 0x77, 1}); return r }()
)

func textRef(s string) asl.Reference { return asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte(s))) }

// rawInput and rawStep write PLAN/1 bytes field by field without any
// check, for the rejection vectors.
type rawInput struct {
	name   string
	src    byte
	ref    asl.Reference
	step   string
	output string
}

type rawStep struct {
	id               string
	deps             []string
	inputs           []rawInput
	kind             byte
	program          asl.Reference
	params           *asl.Reference
	effect, eparams  string
	class, gate      byte
	max, base, limit uint32
	cache            byte
	key              string
}

func (s rawStep) bytes() []byte {
	b := cat(rawStr(s.id), u32(uint32(len(s.deps))))
	for _, d := range s.deps {
		b = cat(b, rawStr(d))
	}
	b = cat(b, u32(uint32(len(s.inputs))))
	for _, in := range s.inputs {
		b = cat(b, rawStr(in.name), []byte{in.src})
		if in.src == 1 {
			b = cat(b, rawRef(in.ref))
		} else {
			b = cat(b, rawStr(in.step), rawStr(in.output))
		}
	}
	b = cat(b, []byte{s.kind})
	if s.kind == 1 {
		return cat(b, rawRef(s.program), rawOptRef(s.params))
	}
	return cat(b, rawStr(s.effect), rawStr(s.eparams), []byte{s.class, s.gate}, u32(s.max), u32(s.base), u32(s.limit), []byte{s.cache}, rawStr(s.key))
}

func rawPlan(steps ...rawStep) []byte {
	b := cat([]byte{1}, u32(uint32(len(steps))))
	for _, s := range steps {
		b = cat(b, s.bytes())
	}
	return b
}

// The worked example of §22.10: fetch a document, count its words.
const examplePlanJSON = `{"steps":[
  {"id":"fetch","effect":{"kind":"http","params":{"url":"http://127.0.0.1/doc"},"class":"read_only","gate":"none",
   "retry":{"max_attempts":3,"base_ms":200,"cap_ms":5000},"cache":"reuse"}},
  {"id":"count","inputs":{"0":{"step":"fetch","output":"body"}},"pel":{"program":"00011b2564b4c0314239dfe740c4d10ee7e4f380aa19d20510982becfeb1a01b5580"}}
]}`

func exampleSteps() (count, fetch rawStep) {
	count = rawStep{id: "count", deps: []string{"fetch"}, inputs: []rawInput{{name: "0", src: 2, step: "fetch", output: "body"}}, kind: 1, program: refConstSeed}
	fetch = rawStep{id: "fetch", kind: 2, effect: "http", eparams: `{"url":"http://127.0.0.1/doc"}`, class: 1, gate: 1, max: 3, base: 200, limit: 5000, cache: 2}
	return
}

func effectJSON(class, gate, cache, extra string) string {
	return `"effect":{"kind":"mail","params":{"to":"a@b"},"class":"` + class + `","gate":"` + gate + `","retry":{"max_attempts":1,"base_ms":0,"cap_ms":0},"cache":"` + cache + `"` + extra + `}`
}

func genPlan() ([]Vector, error) {
	var l vectorList
	prog := refConstSeed.String()
	accept := []struct{ name, desc, json string }{
		{"empty", "the empty plan: version 1 and a step count of 0", `{"steps":[]}`},
		{"example", "the worked example of §22.10: an http fetch (read_only, no gate, 3 attempts, reuse) and a PEL step reading its body", examplePlanJSON},
		{"normalized", "steps out of order, depends_on unsorted with a duplicate and without the bound step, params with white space and unsorted members: all normalized (§22.2)",
			`{"steps":[{"id":"z","depends_on":["b","a","b"],"inputs":{"y":{"step":"c","output":"o"},"x":"` + textRef("x").String() + `"},` + effectJSON("produce_outcome", "none", "none", "") + `},` +
				`{"id":"c",` + effectJSON("read_only", "none", "reuse", "") + `},{"id":"b",` + effectJSON("read_only", "none", "reuse", "") + `},` +
				`{"id":"a","effect":{"kind":"http","params":{ "b" : [1, 2], "a" : {"d":null,"c":true} },"class":"read_only","gate":"none","retry":{"max_attempts":1,"base_ms":0,"cap_ms":0},"cache":"none"}}]}`},
		{"every-declaration", "every value of every enumeration: the three classes, both gates, both cache policies, a key template with every placeholder and escaped braces, a PEL step with params, inputs under BLAKE3 and an unregistered hash id",
			`{"steps":[{"id":"draft",` + effectJSON("produce_outcome", "none", "reuse", `,"key":"{{draft}}:{kind}:{step}:{plan}:{params}:{input:doc}:{derived}"`) + `,"inputs":{"doc":"` + refBlake.String() + `"}},` +
				`{"id":"send","inputs":{"body":{"step":"draft","output":"text"}},` + effectJSON("external_send", "approval", "none", "") + `},` +
				`{"id":"pure","inputs":{"0":"` + refUnknown.String() + `","1":{"step":"send","output":"status"}},"pel":{"program":"` + prog + `","params":"` + textRef("params").String() + `"}}]}`},
		{"external-send-reuse", "an external_send step with cache reuse and a literal key: accepted (§22.3 says why)",
			`{"steps":[{"id":"pay",` + effectJSON("external_send", "approval", "reuse", `,"key":"invoice-2026-001"`) + `}]}`},
		{"params-canonical", "params in canonical JSON: members sorted bytewise (\"Z\" < \"e\" < \"z\" < \"é\"), numbers as written (1.50, -0, 1e3), escapes only where JSON needs them",
			`{"steps":[{"id":"p","effect":{"kind":"k","params":{"z":1,"é":"\u00e9\u2028","e":[1.50,-0,1e3],"Z":"\"\\\/\b\f\n\r\t\u0001\u007f"},"class":"read_only","gate":"none","retry":{"max_attempts":1000,"base_ms":4294967295,"cap_ms":4294967295},"cache":"none"}}]}`},
		{"diamond", "a diamond: b and c depend on a, d on b and c (through an input and depends_on)",
			`{"steps":[{"id":"d","depends_on":["c"],"inputs":{"0":{"step":"b","output":"0"}},"pel":{"program":"` + prog + `"}},` +
				`{"id":"b","inputs":{"0":{"step":"a","output":"0"}},"pel":{"program":"` + prog + `"}},` +
				`{"id":"c","depends_on":["a"],"pel":{"program":"` + prog + `"}},{"id":"a","pel":{"program":"` + prog + `"}}]}`},
	}
	for _, c := range accept {
		p, err := plan.Build([]byte(c.json))
		if err != nil {
			return nil, fmt.Errorf("plan case %s: %w", c.name, err)
		}
		b, _ := p.Encode()
		l.add("plan.build."+c.name, "build: "+c.desc, "§22.4", KindPlanBuild, planBuildInput{PlanJSON: ptr(c.json)},
			map[string]any{"plan_bytes": Hex(b), "reference": asl.MustDerive(asl.HashSHA256, asl.Tagged(plan.TagPlan, b)).String()})
		l.add("plan.decode."+c.name, "decode and re-encode: "+c.desc, "§22.2", KindPlanDecode, bytesVec{PlanBytes: ptr(Hex(b))},
			planDecodeExpect{PlanForm: p.JSON()})
	}
	refusals := []struct{ name, desc, json string }{
		{"not-object", "the plan is an array", `[]`},
		{"no-steps", "no steps member", `{}`},
		{"unknown-member", "a member the format does not have", `{"steps":[],"name":"x"}`},
		{"duplicate-member", "a member given twice", `{"steps":[],"steps":[]}`},
		{"trailing", "data after the plan", `{"steps":[]}{}`},
		{"missing-class", "an effect step without class", `{"steps":[{"id":"a","effect":{"kind":"k","params":{},"gate":"none","retry":{"max_attempts":1,"base_ms":0,"cap_ms":0},"cache":"none"}}]}`},
		{"missing-gate", "an effect step without gate (seed 004, plan invariants)", `{"steps":[{"id":"a","effect":{"kind":"k","params":{},"class":"read_only","retry":{"max_attempts":1,"base_ms":0,"cap_ms":0},"cache":"none"}}]}`},
		{"missing-retry", "an effect step without retry", `{"steps":[{"id":"a","effect":{"kind":"k","params":{},"class":"read_only","gate":"none","cache":"none"}}]}`},
		{"missing-cap", "a retry policy without cap_ms", `{"steps":[{"id":"a","effect":{"kind":"k","params":{},"class":"read_only","gate":"none","retry":{"max_attempts":1,"base_ms":0},"cache":"none"}}]}`},
		{"missing-cache", "an effect step without cache", `{"steps":[{"id":"a","effect":{"kind":"k","params":{},"class":"read_only","gate":"none","retry":{"max_attempts":1,"base_ms":0,"cap_ms":0}}}]}`},
		{"missing-params", "an effect step without params", `{"steps":[{"id":"a","effect":{"kind":"k","class":"read_only","gate":"none","retry":{"max_attempts":1,"base_ms":0,"cap_ms":0},"cache":"none"}}]}`},
		{"unknown-class", "class \"send\"", `{"steps":[{"id":"a",` + effectJSON("send", "none", "none", "") + `}]}`},
		{"unknown-gate", "gate \"human\"", `{"steps":[{"id":"a",` + effectJSON("read_only", "human", "none", "") + `}]}`},
		{"unknown-cache", "cache \"never\"", `{"steps":[{"id":"a",` + effectJSON("read_only", "none", "never", "") + `}]}`},
		{"empty-key", "an empty key template (omit it for the derived key)", `{"steps":[{"id":"a",` + effectJSON("read_only", "none", "none", `,"key":""`) + `}]}`},
		{"unknown-placeholder", "a key template with {user}", `{"steps":[{"id":"a",` + effectJSON("read_only", "none", "none", `,"key":"{user}"`) + `}]}`},
		{"template-input", "a key template naming an input the step does not have", `{"steps":[{"id":"a",` + effectJSON("read_only", "none", "none", `,"key":"{input:doc}"`) + `}]}`},
		{"lone-brace", "a key template with a lone '}'", `{"steps":[{"id":"a",` + effectJSON("read_only", "none", "none", `,"key":"a}b"`) + `}]}`},
		{"zero-attempts", "max_attempts 0", `{"steps":[{"id":"a","effect":{"kind":"k","params":{},"class":"read_only","gate":"none","retry":{"max_attempts":0,"base_ms":0,"cap_ms":0},"cache":"none"}}]}`},
		{"cap-below-base", "cap_ms below base_ms", `{"steps":[{"id":"a","effect":{"kind":"k","params":{},"class":"read_only","gate":"none","retry":{"max_attempts":2,"base_ms":10,"cap_ms":9},"cache":"none"}}]}`},
		{"params-array", "params that are not an object", `{"steps":[{"id":"a","effect":{"kind":"k","params":[],"class":"read_only","gate":"none","retry":{"max_attempts":1,"base_ms":0,"cap_ms":0},"cache":"none"}}]}`},
		{"no-program", "a PEL step without program", `{"steps":[{"id":"a","pel":{}}]}`},
		{"pel-and-effect", "a step with both pel and effect", `{"steps":[{"id":"a","pel":{"program":"` + prog + `"},` + effectJSON("read_only", "none", "none", "") + `}]}`},
		{"neither", "a step with neither pel nor effect", `{"steps":[{"id":"a"}]}`},
		{"empty-id", "an empty step id", `{"steps":[{"id":"","pel":{"program":"` + prog + `"}}]}`},
		{"id-charset", "a step id with a space", `{"steps":[{"id":"a b","pel":{"program":"` + prog + `"}}]}`},
		{"duplicate-id", "two steps with one id", `{"steps":[{"id":"a","pel":{"program":"` + prog + `"}},{"id":"a","pel":{"program":"` + prog + `"}}]}`},
		{"unknown-dependency", "depends_on names no step", `{"steps":[{"id":"a","depends_on":["b"],"pel":{"program":"` + prog + `"}}]}`},
		{"self-dependency", "a step depending on itself", `{"steps":[{"id":"a","depends_on":["a"],"pel":{"program":"` + prog + `"}}]}`},
		{"unknown-bound-step", "an input bound to an output of no step", `{"steps":[{"id":"a","inputs":{"0":{"step":"b","output":"0"}},"pel":{"program":"` + prog + `"}}]}`},
		{"cycle", "a cycle a -> b -> c -> a", `{"steps":[{"id":"a","depends_on":["c"],"pel":{"program":"` + prog + `"}},{"id":"b","depends_on":["a"],"pel":{"program":"` + prog + `"}},{"id":"c","inputs":{"0":{"step":"b","output":"0"}},"pel":{"program":"` + prog + `"}}]}`},
		{"pel-input-name", "a PEL step with an input not named by its index", `{"steps":[{"id":"a","inputs":{"doc":"` + prog + `"},"pel":{"program":"` + prog + `"}}]}`},
		{"pel-input-gap", "a PEL step with inputs 0 and 2", `{"steps":[{"id":"a","inputs":{"0":"` + prog + `","2":"` + prog + `"},"pel":{"program":"` + prog + `"}}]}`},
		{"pel-output-name", "an input bound to output \"body\" of a PEL step", `{"steps":[{"id":"a","pel":{"program":"` + prog + `"}},{"id":"b","inputs":{"0":{"step":"a","output":"body"}},"pel":{"program":"` + prog + `"}}]}`},
		{"bad-reference", "a program reference that is not a reference", `{"steps":[{"id":"a","pel":{"program":"0001ab"}}]}`},
	}
	for _, c := range refusals {
		if _, err := plan.Build([]byte(c.json)); err == nil {
			return nil, fmt.Errorf("plan refusal %s accepted", c.name)
		}
		l.add("plan.build.reject."+c.name, "refuse to build: "+c.desc, "§22.3", KindPlanBuild, planBuildInput{PlanJSON: ptr(c.json)}, rejectExpect{&Reject{Field: "plan"}})
	}

	count, fetch := exampleSteps()
	full := rawPlan(count, fetch)
	// The bytes written field by field from §22.2 are the encoder's.
	if ex, err := plan.Build([]byte(examplePlanJSON)); err != nil {
		return nil, err
	} else if eb, _ := ex.Encode(); !bytes.Equal(eb, full) {
		return nil, fmt.Errorf("raw example plan %x differs from the encoder's %x", full, eb)
	}
	with := func(f func(c, e *rawStep)) []byte {
		c, e := exampleSteps()
		f(&c, &e)
		return rawPlan(c, e)
	}
	pelA := rawStep{id: "a", kind: 1, program: refConstSeed}
	pelB := rawStep{id: "b", kind: 1, program: refConstSeed}
	set := func(off int, v ...byte) []byte { return setAt(full, off, v...) }
	for _, c := range []bytesCase{
		{"empty", "no bytes: version truncated", nil},
		{"version-0", "version 0x00", set(0, 0)},
		{"version-2", "version 0x02", set(0, 2)},
		{"count-past-end", "step_count 9 for two steps' bytes", set(1, 0, 0, 0, 9)},
		{"count-huge", "step_count 2^32-1: refused before allocating", set(1, 0xff, 0xff, 0xff, 0xff)},
		{"unsorted-steps", "steps \"fetch\" then \"count\"", rawPlan(fetch, count)},
		{"duplicate-step", "step \"a\" twice", rawPlan(pelA, pelA)},
		{"empty-id", "an empty step id", rawPlan(rawStep{kind: 1, program: refConstSeed})},
		{"id-charset", "a step id with '/'", rawPlan(rawStep{id: "a/b", kind: 1, program: refConstSeed})},
		{"unsorted-depends-on", "depends_on [\"b\",\"a\"]", rawPlan(pelA, pelB, rawStep{id: "c", deps: []string{"b", "a"}, kind: 1, program: refConstSeed})},
		{"duplicate-depends-on", "depends_on [\"a\",\"a\"]", rawPlan(pelA, rawStep{id: "c", deps: []string{"a", "a"}, kind: 1, program: refConstSeed})},
		{"unknown-dependency", "depends_on names no step", with(func(c, _ *rawStep) { c.deps = []string{"fetch", "zzz"} })},
		{"self-dependency", "a step depending on itself", with(func(c, _ *rawStep) { c.deps = []string{"count", "fetch"} })},
		{"bound-step-not-in-depends-on", "an input bound to \"fetch\" while depends_on is empty", with(func(c, _ *rawStep) { c.deps = nil })},
		{"cycle", "a cycle: fetch depends on count, which reads fetch", with(func(_, e *rawStep) { e.deps = []string{"count"} })},
		{"unsorted-inputs", "inputs \"1\" then \"0\"", rawPlan(rawStep{id: "a", kind: 1, program: refConstSeed, inputs: []rawInput{{name: "1", src: 1, ref: refConstSeed}, {name: "0", src: 1, ref: refConstSeed}}})},
		{"duplicate-input", "input \"0\" twice", rawPlan(rawStep{id: "a", kind: 1, program: refConstSeed, inputs: []rawInput{{name: "0", src: 1, ref: refConstSeed}, {name: "0", src: 1, ref: refConstSeed}}})},
		{"source-0", "input source 0x00", with(func(c, _ *rawStep) { c.inputs[0].src = 0 })},
		{"source-3", "input source 0x03", with(func(c, _ *rawStep) { c.inputs[0].src = 3 })},
		{"pel-input-name", "a PEL step's input named \"doc\"", with(func(c, _ *rawStep) { c.inputs[0].name = "doc" })},
		{"pel-output-name", "an input bound to output \"body\" of a PEL step", rawPlan(pelA, rawStep{id: "b", deps: []string{"a"}, kind: 1, program: refConstSeed, inputs: []rawInput{{name: "0", src: 2, step: "a", output: "body"}}})},
		{"empty-output-name", "an input bound to an empty output name", with(func(c, _ *rawStep) { c.inputs[0].output = "" })},
		{"kind-0", "step kind 0x00", with(func(c, _ *rawStep) { c.kind = 0 })},
		{"kind-3", "step kind 0x03", with(func(c, _ *rawStep) { c.kind = 3 })},
		{"program-ref-len-1", "a program EncodedRef with ref_len 1", setAt(rawPlan(pelA), 19, 0, 0, 0, 1)},
		{"params-has-ref-2", "a PEL params flag 0x02", setAt(rawPlan(pelA), 19+38, 2)},
		{"effect-kind-empty", "an empty effect kind", with(func(_, e *rawStep) { e.effect = "" })},
		{"params-not-canonical", "params with white space", with(func(_, e *rawStep) { e.eparams = `{"url": "http://127.0.0.1/doc"}` })},
		{"params-unsorted", "params with members out of order", with(func(_, e *rawStep) { e.eparams = `{"url":"u","method":"GET"}` })},
		{"params-array", "params that are an array", with(func(_, e *rawStep) { e.eparams = `[]` })},
		{"params-empty", "empty params (the empty object is {})", with(func(_, e *rawStep) { e.eparams = `` })},
		{"class-0", "class 0x00", with(func(_, e *rawStep) { e.class = 0 })},
		{"class-4", "class 0x04", with(func(_, e *rawStep) { e.class = 4 })},
		{"gate-0", "gate 0x00", with(func(_, e *rawStep) { e.gate = 0 })},
		{"gate-3", "gate 0x03", with(func(_, e *rawStep) { e.gate = 3 })},
		{"zero-attempts", "max_attempts 0", with(func(_, e *rawStep) { e.max = 0 })},
		{"too-many-attempts", "max_attempts 1001", with(func(_, e *rawStep) { e.max = 1001 })},
		{"cap-below-base", "cap_ms 199 below base_ms 200", with(func(_, e *rawStep) { e.limit = 199 })},
		{"cache-0", "cache 0x00", with(func(_, e *rawStep) { e.cache = 0 })},
		{"cache-3", "cache 0x03", with(func(_, e *rawStep) { e.cache = 3 })},
		{"bad-template", "a key template with an unknown placeholder", with(func(_, e *rawStep) { e.key = "{nope}" })},
		{"truncated-binding", "the input ends inside the first step's binding (its output name)", full[:50]},
		{"truncated-program", "the input ends inside the first step's program reference", full[:60]},
		{"truncated-effect", "the input ends inside the effect step's retry policy", full[:len(full)-10]},
		{"trailing-byte", "the plan followed by one byte", cat(full, h("00"))},
	} {
		_, err := plan.DecodePlan(c.in)
		if err == nil {
			return nil, fmt.Errorf("plan reject case %s accepted", c.name)
		}
		l.add("plan.reject."+c.name, "reject: "+c.desc, "§22.2", KindPlanDecode, bytesVec{PlanBytes: ptr(Hex(c.in))}, rejectExpect{RejectOf(err, "")})
	}

	// Effect keys (§22.5).
	ins := map[string]string{"b": textRef("world").String(), "a": textRef("hello").String()}
	keyCases := []struct {
		name, desc, tmpl string
		ins              map[string]string
	}{
		{"derived", "the derived key (no template) of http, {\"url\":\"x\"} and inputs a, b: SHA-256 of the bytes of §22.5", "", ins},
		{"derived-no-inputs", "the derived key of a step without inputs", "", map[string]string{}},
		{"template-placeholders", "a template with every placeholder", "{kind}/{step}/{plan}/{params}/{input:a}/{derived}", ins},
		{"template-literal", "a literal template with escaped braces", "{{send}}-2026", ins},
	}
	for _, c := range keyCases {
		in := effectKeyInput{Effect: "http", EffectParams: `{"url":"x"}`, Step: "fetch", KeyTemplate: c.tmpl, PlanRef: refConstSeed.String(), NamedInputs: c.ins}
		ans, err := solveEffectKey(nil, in)
		if err != nil {
			return nil, err
		}
		l.add("plan.key."+c.name, "idempotency key: "+c.desc, "§22.5", KindEffectKey, in, ans)
	}
	for _, c := range []struct{ name, desc, tmpl string }{
		{"unknown-placeholder", "an unknown placeholder {user}", "{user}"},
		{"unknown-input", "{input:c} where the step has inputs a and b", "{input:c}"},
		{"lone-brace", "a lone '}'", "a}"},
		{"unclosed", "an unclosed '{'", "a{kind"},
		{"control", "a control character", "a\tb"},
	} {
		in := effectKeyInput{Effect: "http", EffectParams: `{"url":"x"}`, Step: "fetch", KeyTemplate: c.tmpl, PlanRef: refConstSeed.String(), NamedInputs: ins}
		l.add("plan.key.reject."+c.name, "refuse the key template: "+c.desc, "§22.5", KindEffectKey, in, rejectExpect{&Reject{Field: "key_template"}})
	}
	return l.vs, l.err
}

func genPlanReceipt() ([]Vector, error) {
	var l vectorList
	hello, world := textRef("hello"), textRef("world")
	// Effect requests.
	reqs := []struct {
		name, desc string
		v          effectRequestVec
	}{
		{"example", "the request of the worked example's fetch: http, its params, no inputs, its derived key",
			effectRequestVec{Effect: "http", EffectParams: `{"url":"http://127.0.0.1/doc"}`, NamedInputs: map[string]string{}, IdempotencyKey: "fetch-1"}},
		{"inputs", "inputs sorted by name, under SHA-256, BLAKE3 and an unregistered hash id",
			effectRequestVec{Effect: "exec", EffectParams: `{"argv":["wc","-w"]}`, NamedInputs: map[string]string{"z": hello.String(), "a": refBlake.String(), "m": refUnknown.String()}, IdempotencyKey: strings.Repeat("k", plan.MaxKey)}},
	}
	for _, c := range reqs {
		q, _ := c.v.value()
		b, err := q.Encode()
		if err != nil {
			return nil, fmt.Errorf("request case %s: %w", c.name, err)
		}
		ans, _ := encodeAnswer("request_bytes", "effect request", plan.TagEffectRequest, q.Encode)
		l.add("plan.receipt.request.encode."+c.name, "encode: "+c.desc, "§22.6", KindEffectRequestEncode, c.v, ans)
		l.add("plan.receipt.request.decode."+c.name, "decode and re-encode: "+c.desc, "§22.6", KindEffectRequestDecode, bytesVec{RequestBytes: ptr(Hex(b))}, requestToVec(q))
	}
	for _, c := range []struct {
		name, desc string
		v          effectRequestVec
	}{
		{"kind", "an effect kind with a space", effectRequestVec{Effect: "h p", EffectParams: `{}`, IdempotencyKey: "k"}},
		{"params", "params not in canonical form", effectRequestVec{Effect: "http", EffectParams: `{ }`, IdempotencyKey: "k"}},
		{"key", "an empty key", effectRequestVec{Effect: "http", EffectParams: `{}`}},
		{"input-name", "an input named \"..\"", effectRequestVec{Effect: "http", EffectParams: `{}`, IdempotencyKey: "k", NamedInputs: map[string]string{"..": hello.String()}}},
	} {
		l.add("plan.receipt.request.encode.reject."+c.name, "refuse to encode: "+c.desc, "§22.6", KindEffectRequestEncode, c.v, rejectExpect{&Reject{Field: "effect request"}})
	}
	rawReq := func(kind, params string, names []string, refs []asl.Reference, key string) []byte {
		return cat([]byte{1}, rawStr(kind), rawStr(params), rawNamed(names, refs...), rawStr(key))
	}
	goodReq := rawReq("http", `{}`, []string{"a", "b"}, []asl.Reference{hello, world}, "k")
	for _, c := range []bytesCase{
		{"empty", "no bytes", nil},
		{"version-2", "version 0x02", cat([]byte{2}, goodReq[1:])},
		{"kind-empty", "an empty effect kind", rawReq("", `{}`, nil, nil, "k")},
		{"params-not-canonical", "params with white space", rawReq("http", `{ }`, nil, nil, "k")},
		{"inputs-unsorted", "inputs b then a", rawReq("http", `{}`, []string{"b", "a"}, []asl.Reference{hello, world}, "k")},
		{"inputs-duplicate", "input a twice", rawReq("http", `{}`, []string{"a", "a"}, []asl.Reference{hello, world}, "k")},
		{"input-count-huge", "an input count of 2^32-1", cat([]byte{1}, rawStr("http"), rawStr(`{}`), h("ffffffff"), rawStr("k"))},
		{"key-empty", "an empty key", rawReq("http", `{}`, nil, nil, "")},
		{"key-control", "a key with a newline", rawReq("http", `{}`, nil, nil, "k\n")},
		{"truncated", "the input ends inside the second input's reference", goodReq[:len(goodReq)-10]},
		{"trailing-byte", "the request followed by one byte", cat(goodReq, h("00"))},
	} {
		_, err := plan.DecodeEffectRequest(c.in)
		if err == nil {
			return nil, fmt.Errorf("request reject case %s accepted", c.name)
		}
		l.add("plan.receipt.request.reject."+c.name, "reject: "+c.desc, "§22.6", KindEffectRequestDecode, bytesVec{RequestBytes: ptr(Hex(c.in))}, rejectExpect{RejectOf(err, "")})
	}

	// Receipts.
	base := receiptVec{ReceiptKind: "attempt", PlanRef: refConstSeed.String(), ExecutionRef: world.String(), Step: "fetch", Effect: "http",
		RequestRef: hello.String(), IdempotencyKey: "fetch-1", Attempt: 1, Outcome: "succeeded", ErrorClass: "none",
		NamedOutputs: map[string]string{}, Executor: "http", ExecutorVersion: "amduat-http/1", Start: 1764201600000000000, End: 1764201600250000000}
	mod := func(f func(v *receiptVec)) receiptVec {
		v := base
		v.NamedOutputs = map[string]string{}
		f(&v)
		return v
	}
	receipts := []struct {
		name, desc string
		v          receiptVec
	}{
		{"succeeded", "attempt 1 succeeded with three outputs (body, headers, status), sorted by name",
			mod(func(v *receiptVec) {
				v.NamedOutputs = map[string]string{"status": textRef("200").String(), "body": textRef("one two three").String(), "headers": textRef("content-type: text/plain").String()}
			})},
		{"failed-retryable", "attempt 2 failed with the retryable class rate_limited",
			mod(func(v *receiptVec) {
				v.Attempt, v.Outcome, v.ErrorClass, v.Message = 2, "failed_retryable", "rate_limited", "HTTP 429 Too Many Requests"
			})},
		{"failed-final", "attempt 1 failed with the final class invalid_input", mod(func(v *receiptVec) {
			v.Outcome, v.ErrorClass, v.Message = "failed_final", "invalid_input", "HTTP 400"
		})},
		{"failed-final-exhausted", "the last of 3 attempts failed with network_timeout: final, with a retryable class", mod(func(v *receiptVec) {
			v.Attempt, v.Outcome, v.ErrorClass, v.Message = 3, "failed_final", "network_timeout", "no answer in 30s"
		})},
		{"unknown-outcome", "the connection broke after the request was sent", mod(func(v *receiptVec) {
			v.Outcome, v.Message = "unknown_outcome", "connection reset after the request"
		})},
		{"approval", "an approval by the token \"alice\": attempt 0, no outcome, no executor", mod(func(v *receiptVec) {
			v.ReceiptKind, v.Attempt, v.Outcome, v.Executor, v.ExecutorVersion, v.Actor, v.End = "approval", 0, "none", "", "", "alice", v.Start
		})},
		{"rejection", "a rejection, with a reason in the message", mod(func(v *receiptVec) {
			v.ReceiptKind, v.Attempt, v.Outcome, v.Executor, v.ExecutorVersion, v.Actor, v.Message = "rejection", 0, "none", "", "", "bob", "not this week"
		})},
		{"negative-times", "times before 1970 (i64 two's complement) and a multi-line message", mod(func(v *receiptVec) {
			v.Start, v.End, v.Outcome, v.ErrorClass, v.Message = -1, -9223372036854775808, "failed_final", "executor_fault", "line 1\nline 2"
		})},
	}
	for _, c := range receipts {
		r, err := c.v.value()
		if err != nil {
			return nil, err
		}
		b, err := r.Encode()
		if err != nil {
			return nil, fmt.Errorf("receipt case %s: %w", c.name, err)
		}
		ans, _ := encodeAnswer("receipt_bytes", "receipt", plan.TagReceipt, r.Encode)
		l.add("plan.receipt.encode."+c.name, "encode: "+c.desc, "§22.7", KindReceiptEncode, c.v, ans)
		l.add("plan.receipt.decode."+c.name, "decode and re-encode: "+c.desc, "§22.7", KindReceiptDecode, bytesVec{ReceiptBytes: ptr(Hex(b))}, receiptToVec(r))
	}
	for _, c := range []struct {
		name, desc string
		v          receiptVec
	}{
		{"attempt-0", "an attempt numbered 0", mod(func(v *receiptVec) { v.Attempt = 0 })},
		{"succeeded-with-class", "succeeded with an error class", mod(func(v *receiptVec) { v.ErrorClass = "rate_limited" })},
		{"retryable-final-class", "failed_retryable with the final class policy_denied", mod(func(v *receiptVec) { v.Outcome, v.ErrorClass = "failed_retryable", "policy_denied" })},
		{"final-without-class", "failed_final without an error class", mod(func(v *receiptVec) { v.Outcome = "failed_final" })},
		{"attempt-without-outcome", "an attempt with outcome none", mod(func(v *receiptVec) { v.Outcome = "none" })},
		{"attempt-without-executor", "an attempt without executor", mod(func(v *receiptVec) { v.Executor = "" })},
		{"attempt-with-actor", "an attempt with an actor", mod(func(v *receiptVec) { v.Actor = "alice" })},
		{"approval-without-actor", "an approval without actor", mod(func(v *receiptVec) {
			v.ReceiptKind, v.Attempt, v.Outcome, v.Executor, v.ExecutorVersion = "approval", 0, "none", "", ""
		})},
		{"approval-with-attempt", "an approval with attempt 1", mod(func(v *receiptVec) {
			v.ReceiptKind, v.Outcome, v.Executor, v.ExecutorVersion, v.Actor = "approval", "none", "", "", "alice"
		})},
		{"step-empty", "an empty step id", mod(func(v *receiptVec) { v.Step = "" })},
		{"output-name-control", "an output name with a newline", mod(func(v *receiptVec) { v.NamedOutputs = map[string]string{"a\n": hello.String()} })},
	} {
		l.add("plan.receipt.encode.reject."+c.name, "refuse to encode: "+c.desc, "§22.7", KindReceiptEncode, c.v, rejectExpect{&Reject{Field: "receipt"}})
	}
	// rawReceipt writes ReceiptBytes from the succeeded case with fields
	// replaced.
	type rr struct {
		version, kind       byte
		step, key, executor string
		execVersion         string
		attempt             uint32
		outcome, class      byte
		outNames            []string
		outRefs             []asl.Reference
		actor               string
	}
	rawRec := func(f func(x *rr)) []byte {
		x := rr{version: 1, kind: 1, step: "fetch", key: "fetch-1", executor: "http", execVersion: "1", attempt: 1, outcome: 1,
			outNames: []string{"body", "status"}, outRefs: []asl.Reference{hello, world}}
		f(&x)
		return cat([]byte{x.version, x.kind}, rawRef(refConstSeed), rawRef(world), rawStr(x.step), rawStr("http"), rawRef(hello),
			rawStr(x.key), u32(x.attempt), []byte{x.outcome, x.class}, rawStr(""), rawNamed(x.outNames, x.outRefs...),
			rawStr(x.executor), rawStr(x.execVersion), u64(1), u64(2), rawStr(x.actor))
	}
	goodRec := rawRec(func(*rr) {})
	if _, err := plan.DecodeReceipt(goodRec); err != nil {
		return nil, fmt.Errorf("raw receipt: %w", err)
	}
	for _, c := range []bytesCase{
		{"empty", "no bytes", nil},
		{"version-0", "version 0x00", rawRec(func(x *rr) { x.version = 0 })},
		{"receipt-kind-0", "receipt_kind 0x00", rawRec(func(x *rr) { x.kind = 0 })},
		{"receipt-kind-4", "receipt_kind 0x04", rawRec(func(x *rr) { x.kind = 4 })},
		{"step-charset", "a step id with a space", rawRec(func(x *rr) { x.step = "a b" })},
		{"key-empty", "an empty idempotency key", rawRec(func(x *rr) { x.key = "" })},
		{"outcome-5", "outcome 0x05", rawRec(func(x *rr) { x.outcome = 5 })},
		{"error-class-5", "error class 0x05 (unassigned)", rawRec(func(x *rr) { x.outcome, x.class = 3, 5 })},
		{"error-class-21", "error class 0x15 (unassigned)", rawRec(func(x *rr) { x.outcome, x.class = 3, 21 })},
		{"outputs-unsorted", "outputs status then body", rawRec(func(x *rr) { x.outNames = []string{"status", "body"} })},
		{"outputs-duplicate", "output body twice", rawRec(func(x *rr) { x.outNames = []string{"body", "body"} })},
		{"attempt-0", "an attempt receipt with attempt 0 (reported at the attempt)", rawRec(func(x *rr) { x.attempt = 0 })},
		{"succeeded-with-class", "succeeded with class rate_limited (reported at the error class)", rawRec(func(x *rr) { x.class = 2 })},
		{"retryable-final-class", "failed_retryable with class policy_denied", rawRec(func(x *rr) { x.outcome, x.class = 2, 16 })},
		{"approval-with-outcome", "an approval with outcome succeeded", rawRec(func(x *rr) {
			x.kind, x.attempt, x.outNames, x.outRefs, x.executor, x.actor = 2, 0, nil, nil, "", "alice"
		})},
		{"approval-without-actor", "an approval without actor", rawRec(func(x *rr) {
			x.kind, x.attempt, x.outcome, x.outNames, x.outRefs, x.executor, x.execVersion = 2, 0, 0, nil, nil, "", ""
		})},
		{"truncated-times", "the input ends inside the start time", goodRec[:len(goodRec)-14]},
		{"trailing-byte", "the receipt followed by one byte", cat(goodRec, h("00"))},
	} {
		_, err := plan.DecodeReceipt(c.in)
		if err == nil {
			return nil, fmt.Errorf("receipt reject case %s accepted", c.name)
		}
		l.add("plan.receipt.reject."+c.name, "reject: "+c.desc, "§22.7", KindReceiptDecode, bytesVec{ReceiptBytes: ptr(Hex(c.in))}, rejectExpect{RejectOf(err, "")})
	}
	return l.vs, l.err
}

func genPlanEvent() ([]Vector, error) {
	var l vectorList
	hello, world := textRef("hello"), textRef("world")
	// Submissions.
	subs := []struct {
		name, desc string
		v          submissionVec
	}{
		{"example", "the worked example: the plan of §22.10, gated, no inputs, no label", submissionVec{PlanRef: "PLAN", Mode: "gated", NamedInputs: map[string]string{}}},
		{"dry-run", "mode dry-run", submissionVec{PlanRef: hello.String(), Mode: "dry-run", NamedInputs: map[string]string{}}},
		{"draft-only", "mode draft-only", submissionVec{PlanRef: hello.String(), Mode: "draft-only", NamedInputs: map[string]string{}}},
		{"auto-inputs-label", "mode auto with two inputs and a label (a new execution of the same request)",
			submissionVec{PlanRef: hello.String(), Mode: "auto", NamedInputs: map[string]string{"doc": world.String(), "cfg": refBlake.String()}, Label: "rerun 2"}},
	}
	examplePlan, err := plan.Build([]byte(examplePlanJSON))
	if err != nil {
		return nil, err
	}
	exampleArt, _ := examplePlan.Artifact()
	exampleRef := asl.MustDerive(asl.HashSHA256, exampleArt)
	for _, c := range subs {
		if c.v.PlanRef == "PLAN" {
			c.v.PlanRef = exampleRef.String()
		}
		s, err := c.v.value()
		if err != nil {
			return nil, err
		}
		b, err := s.Encode()
		if err != nil {
			return nil, fmt.Errorf("submission case %s: %w", c.name, err)
		}
		ans, _ := encodeAnswer("submission_bytes", "submission", plan.TagSubmission, s.Encode)
		l.add("plan.event.submission.encode."+c.name, "encode (the reference is the execution id): "+c.desc, "§22.8", KindSubmissionEncode, c.v, ans)
		l.add("plan.event.submission.decode."+c.name, "decode and re-encode: "+c.desc, "§22.8", KindSubmissionDecode, bytesVec{SubmissionBytes: ptr(Hex(b))}, submissionToVec(s))
	}
	for _, c := range []struct {
		name, desc string
		v          submissionVec
	}{
		{"input-name", "an input named with a '/'", submissionVec{PlanRef: hello.String(), Mode: "auto", NamedInputs: map[string]string{"a/b": world.String()}}},
		{"label-control", "a label with a newline", submissionVec{PlanRef: hello.String(), Mode: "auto", NamedInputs: map[string]string{}, Label: "a\n"}},
	} {
		l.add("plan.event.submission.encode.reject."+c.name, "refuse to encode: "+c.desc, "§22.8", KindSubmissionEncode, c.v, rejectExpect{&Reject{Field: "submission"}})
	}
	rawSub := func(version, mode byte, names []string, refs []asl.Reference, label string) []byte {
		return cat([]byte{version}, rawRef(hello), []byte{mode}, rawNamed(names, refs...), rawStr(label))
	}
	goodSub := rawSub(1, 3, []string{"a"}, []asl.Reference{world}, "")
	for _, c := range []bytesCase{
		{"empty", "no bytes", nil},
		{"version-2", "version 0x02", rawSub(2, 3, nil, nil, "")},
		{"plan-ref-len-0", "a plan EncodedRef with ref_len 0", cat([]byte{1}, u32(0))},
		{"mode-0", "mode 0x00", rawSub(1, 0, nil, nil, "")},
		{"mode-5", "mode 0x05", rawSub(1, 5, nil, nil, "")},
		{"inputs-unsorted", "inputs b then a", rawSub(1, 3, []string{"b", "a"}, []asl.Reference{world, world}, "")},
		{"input-count-huge", "an input count of 2^32-1", cat([]byte{1}, rawRef(hello), []byte{3}, h("ffffffff"), rawStr(""))},
		{"truncated", "the input ends inside the label's length", goodSub[:len(goodSub)-2]},
		{"trailing-byte", "the submission followed by one byte", cat(goodSub, h("00"))},
	} {
		_, err := plan.DecodeSubmission(c.in)
		if err == nil {
			return nil, fmt.Errorf("submission reject case %s accepted", c.name)
		}
		l.add("plan.event.submission.reject."+c.name, "reject: "+c.desc, "§22.8", KindSubmissionDecode, bytesVec{SubmissionBytes: ptr(Hex(c.in))}, rejectExpect{RejectOf(err, "")})
	}

	// Events: one of every type.
	exec := textRef("execution").String()
	parent := textRef("parent").String()
	receipt := textRef("receipt").String()
	ev := func(seq uint64, typ, step string, f func(v *eventVec)) eventVec {
		v := eventVec{ExecutionRef: exec, Seq: seq, EventType: typ, Step: step, NamedOutputs: map[string]string{}, ErrorClass: "none", Time: 1764201600000000000 + int64(seq)}
		if seq > 1 {
			v.ParentRef = &parent
		}
		if f != nil {
			f(&v)
		}
		return v
	}
	events := []struct {
		name, desc string
		v          eventVec
	}{
		{"submitted", "the first event: seq 1, no parent, no step", ev(1, "submitted", "", nil)},
		{"step-ready", "a step is ready", ev(2, "step_ready", "fetch", nil)},
		{"step-started", "attempt 1 claimed before the call", ev(3, "step_started", "fetch", func(v *eventVec) { v.Attempt = 1 })},
		{"step-succeeded", "a step succeeded with its receipt and outputs", ev(4, "step_succeeded", "fetch", func(v *eventVec) {
			v.Attempt, v.ReceiptRef, v.NamedOutputs = 1, &receipt, map[string]string{"body": hello.String(), "status": world.String()}
		})},
		{"step-failed", "a step failed with the final class policy_denied", ev(5, "step_failed", "send", func(v *eventVec) {
			v.Attempt, v.ReceiptRef, v.ErrorClass, v.Reason = 1, &receipt, "policy_denied", "host not allowed: example.org"
		})},
		{"gate-requested", "a step waits for approval", ev(6, "gate_requested", "send", nil)},
		{"approved", "approved by alice, with the approval receipt", ev(7, "approved", "send", func(v *eventVec) { v.Actor, v.ReceiptRef = "alice", &receipt })},
		{"rejected", "rejected by bob", ev(8, "rejected", "send", func(v *eventVec) { v.Actor, v.ReceiptRef, v.Reason = "bob", &receipt, "not now" })},
		{"partial", "the execution ended partial", ev(9, "partial", "", func(v *eventVec) { v.Reason = "blocked on send: rejected" })},
		{"completed", "the execution completed", ev(10, "completed", "", nil)},
		{"cancelled", "cancelled by alice", ev(11, "cancelled", "", func(v *eventVec) { v.Actor = "alice" })},
		{"step-unknown-outcome", "attempt 2 may have reached the world", ev(12, "step_unknown_outcome", "send", func(v *eventVec) { v.Attempt, v.ReceiptRef = 2, &receipt })},
		{"retry-scheduled", "attempt 2 scheduled after provider_unavailable", ev(13, "retry_scheduled", "fetch", func(v *eventVec) {
			v.Attempt, v.ErrorClass, v.ReceiptRef = 2, "provider_unavailable", &receipt
		})},
		{"step-skipped", "a step skipped in dry-run", ev(14, "step_skipped", "send", func(v *eventVec) { v.Reason = "dry-run" })},
		{"retry-requested", "retry --force by alice", ev(15, "retry_requested", "send", func(v *eventVec) { v.Actor = "alice" })},
		{"resumed", "a runner resumed the execution; seq 2^64-1, time before 1970", ev(18446744073709551615, "resumed", "", func(v *eventVec) { v.Time = -1 })},
	}
	for _, c := range events {
		e, err := c.v.value()
		if err != nil {
			return nil, err
		}
		b, err := e.Encode()
		if err != nil {
			return nil, fmt.Errorf("event case %s: %w", c.name, err)
		}
		ans, _ := encodeAnswer("event_bytes", "event", plan.TagEvent, e.Encode)
		l.add("plan.event.encode."+c.name, "encode: "+c.desc, "§22.9", KindPlanEventEncode, c.v, ans)
		l.add("plan.event.decode."+c.name, "decode and re-encode: "+c.desc, "§22.9", KindPlanEventDecode, bytesVec{EventBytes: ptr(Hex(b))}, eventToVec(e))
	}
	for _, c := range []struct {
		name, desc string
		v          eventVec
	}{
		{"seq-0", "sequence number 0", ev(0, "step_ready", "a", func(v *eventVec) { v.ParentRef = &parent })},
		{"first-with-parent", "seq 1 with a parent", ev(1, "submitted", "", func(v *eventVec) { v.ParentRef = &parent })},
		{"later-without-parent", "seq 2 without a parent", ev(2, "step_ready", "a", func(v *eventVec) { v.ParentRef = nil })},
		{"first-not-submitted", "seq 1 of type step_ready", ev(1, "step_ready", "a", nil)},
		{"submitted-later", "submitted at seq 2", ev(2, "submitted", "", nil)},
		{"plan-level-with-step", "completed naming a step", ev(2, "completed", "a", nil)},
		{"step-level-without-step", "step_ready naming no step", ev(2, "step_ready", "", nil)},
		{"failed-without-class", "step_failed without an error class", ev(2, "step_failed", "a", nil)},
		{"retry-final-class", "retry_scheduled with the final class auth_forbidden", ev(2, "retry_scheduled", "a", func(v *eventVec) { v.ErrorClass = "auth_forbidden" })},
		{"step-charset", "a step id with a space", ev(2, "step_ready", "a b", nil)},
	} {
		l.add("plan.event.encode.reject."+c.name, "refuse to encode: "+c.desc, "§22.9", KindPlanEventEncode, c.v, rejectExpect{&Reject{Field: "event"}})
	}
	execRef, parentRef := textRef("execution"), textRef("parent")
	type re struct {
		version  byte
		seq      uint64
		parent   []byte
		typ      byte
		step     string
		outNames []string
		outRefs  []asl.Reference
		class    byte
		reason   string
		actor    string
	}
	rawEv := func(f func(x *re)) []byte {
		x := re{version: 1, seq: 2, parent: rawOptRef(&parentRef), typ: 4, step: "fetch", outNames: []string{"body"}, outRefs: []asl.Reference{hello}}
		f(&x)
		return cat([]byte{x.version}, rawRef(execRef), u64(x.seq), x.parent, []byte{x.typ}, rawStr(x.step), u32(1), rawOptRef(nil),
			rawNamed(x.outNames, x.outRefs...), []byte{x.class}, rawStr(x.reason), rawStr(x.actor), u64(7))
	}
	goodEv := rawEv(func(*re) {})
	if _, err := plan.DecodeEvent(goodEv); err != nil {
		return nil, fmt.Errorf("raw event: %w", err)
	}
	for _, c := range []bytesCase{
		{"empty", "no bytes", nil},
		{"version-2", "version 0x02", rawEv(func(x *re) { x.version = 2 })},
		{"parent-flag-2", "parent has_ref 0x02", rawEv(func(x *re) { x.parent = []byte{2} })},
		{"type-0", "event type 0x00", rawEv(func(x *re) { x.typ = 0 })},
		{"type-17", "event type 0x11 (unassigned)", rawEv(func(x *re) { x.typ = 17 })},
		{"step-charset", "a step id with a '/'", rawEv(func(x *re) { x.step = "a/b" })},
		{"outputs-unsorted", "outputs z then a", rawEv(func(x *re) { x.outNames, x.outRefs = []string{"z", "a"}, []asl.Reference{hello, hello} })},
		{"error-class-21", "error class 0x15 (unassigned)", rawEv(func(x *re) { x.class = 21 })},
		{"reason-not-utf8", "a reason that is not UTF-8", rawEv(func(x *re) { x.reason = "\xff" })},
		{"actor-control", "an actor with a newline", rawEv(func(x *re) { x.actor = "a\n" })},
		{"seq-0", "sequence number 0 (reported at seq)", rawEv(func(x *re) { x.seq = 0 })},
		{"later-without-parent", "seq 2 without a parent (reported at parent.has_ref)", rawEv(func(x *re) { x.parent = []byte{0} })},
		{"first-not-submitted", "seq 1, no parent, type step_succeeded (reported at event_type)", rawEv(func(x *re) { x.seq, x.parent = 1, []byte{0} })},
		{"plan-level-with-step", "completed naming a step (reported at step)", rawEv(func(x *re) { x.typ = 10 })},
		{"failed-without-class", "step_failed without class (reported at error_class)", rawEv(func(x *re) { x.typ = 5 })},
		{"truncated-time", "the input ends inside the time", goodEv[:len(goodEv)-3]},
		{"trailing-byte", "the event followed by one byte", cat(goodEv, h("00"))},
	} {
		_, err := plan.DecodeEvent(c.in)
		if err == nil {
			return nil, fmt.Errorf("event reject case %s accepted", c.name)
		}
		l.add("plan.event.reject."+c.name, "reject: "+c.desc, "§22.9", KindPlanEventDecode, bytesVec{EventBytes: ptr(Hex(c.in))}, rejectExpect{RejectOf(err, "")})
	}
	return l.vs, l.err
}
