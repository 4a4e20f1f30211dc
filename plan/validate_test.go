package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/plan/effect"
)

// Every rule of SPECS.md §22.3 and §22.4 refused by Build, naming the
// field by its place in the document.
func TestBuildRefuses(t *testing.T) {
	t.Parallel()
	prog := refProgram.String()
	eff := func(extra string) string {
		return `"effect":{"kind":"http","params":{},"class":"read_only","gate":"none","retry":{"max_attempts":1,"base_ms":0,"cap_ms":0},"cache":"none"` + extra + `}`
	}
	cases := []struct{ name, json, want string }{
		{"not an object", `[]`, "the plan: want an object, got an array"},
		{"no steps", `{}`, "steps: missing"},
		{"unknown member", `{"steps":[],"x":1}`, `unknown member "x"`},
		{"duplicate member", `{"steps":[],"steps":[]}`, `member "steps" given twice`},
		{"trailing", `{"steps":[]} {}`, "data after the top-level value"},
		{"step not object", `{"steps":[null]}`, "steps[0]: want an object, got null"},
		{"missing id", `{"steps":[{"pel":{"program":"` + prog + `"}}]}`, "steps[0].id: missing"},
		{"bad id charset", `{"steps":[{"id":"a b","pel":{"program":"` + prog + `"}}]}`, `steps[0].id: step id "a b": byte 0x20`},
		{"empty id", `{"steps":[{"id":"","pel":{"program":"` + prog + `"}}]}`, "steps[0].id: step id empty"},
		{"dot id", `{"steps":[{"id":"..","pel":{"program":"` + prog + `"}}]}`, `steps[0].id: step id ".." is not allowed`},
		{"duplicate id", `{"steps":[{"id":"a",` + eff("") + `},{"id":"a",` + eff("") + `}]}`, `steps[1].id: step id "a" is also the id of steps[0]`},
		{"neither", `{"steps":[{"id":"a"}]}`, "steps[0]: neither pel nor effect"},
		{"both", `{"steps":[{"id":"a","pel":{"program":"` + prog + `"},` + eff("") + `}]}`, "steps[0]: both pel and effect"},
		{"pel without program", `{"steps":[{"id":"a","pel":{}}]}`, "steps[0].pel.program: missing"},
		{"pel bad program", `{"steps":[{"id":"a","pel":{"program":"zz"}}]}`, "steps[0].pel.program:"},
		{"missing kind", `{"steps":[{"id":"a","effect":{}}]}`, "steps[0].effect.kind: missing"},
		{"missing params", `{"steps":[{"id":"a","effect":{"kind":"http"}}]}`, "steps[0].effect.params: missing"},
		{"missing class", `{"steps":[{"id":"a","effect":{"kind":"http","params":{}}}]}`, "steps[0].effect.class: missing"},
		{"unknown class", `{"steps":[{"id":"a","effect":{"kind":"http","params":{},"class":"send"}}]}`, `steps[0].effect.class: "send" is not one of "external_send", "produce_outcome", "read_only"`},
		{"missing gate", `{"steps":[{"id":"a","effect":{"kind":"http","params":{},"class":"read_only"}}]}`, "steps[0].effect.gate: missing"},
		{"missing retry", `{"steps":[{"id":"a","effect":{"kind":"http","params":{},"class":"read_only","gate":"none"}}]}`, "steps[0].effect.retry: missing"},
		{"missing max_attempts", `{"steps":[{"id":"a","effect":{"kind":"http","params":{},"class":"read_only","gate":"none","retry":{}}}]}`, "steps[0].effect.retry.max_attempts: missing"},
		{"negative base", `{"steps":[{"id":"a","effect":{"kind":"http","params":{},"class":"read_only","gate":"none","retry":{"max_attempts":1,"base_ms":-1}}}]}`, "steps[0].effect.retry.base_ms: want an integer"},
		{"missing cache", `{"steps":[{"id":"a","effect":{"kind":"http","params":{},"class":"read_only","gate":"none","retry":{"max_attempts":1,"base_ms":0,"cap_ms":0}}}]}`, "steps[0].effect.cache: missing"},
		{"zero attempts", `{"steps":[{"id":"a","effect":{"kind":"http","params":{},"class":"read_only","gate":"none","retry":{"max_attempts":0,"base_ms":0,"cap_ms":0},"cache":"none"}}]}`, "steps[0].effect.retry.max_attempts: 0 is not in 1..1000"},
		{"cap below base", `{"steps":[{"id":"a","effect":{"kind":"http","params":{},"class":"read_only","gate":"none","retry":{"max_attempts":2,"base_ms":10,"cap_ms":5},"cache":"none"}}]}`, "steps[0].effect.retry.cap_ms: cap 5 ms is below base 10 ms"},
		{"params not object", `{"steps":[{"id":"a","effect":{"kind":"http","params":[],"class":"read_only"}}]}`, "steps[0].effect.params: want an object, got an array"},
		{"bad effect kind", `{"steps":[{"id":"a","effect":{"kind":"h t","params":{},"class":"read_only","gate":"none","retry":{"max_attempts":1,"base_ms":0,"cap_ms":0},"cache":"none"}}]}`, "steps[0].effect.kind: effect kind"},
		{"empty key", `{"steps":[{"id":"a",` + eff(`,"key":""`) + `}]}`, "steps[0].effect.key: empty"},
		{"unknown placeholder", `{"steps":[{"id":"a",` + eff(`,"key":"x{nope}"`) + `}]}`, "steps[0].effect.key: key template: unknown placeholder {nope}"},
		{"unknown template input", `{"steps":[{"id":"a",` + eff(`,"key":"{input:doc}"`) + `}]}`, "steps[0].effect.key: key template: {input:doc} names no input"},
		{"unclosed placeholder", `{"steps":[{"id":"a",` + eff(`,"key":"x{kind"`) + `}]}`, "placeholder at byte 1 is not closed"},
		{"lone brace", `{"steps":[{"id":"a",` + eff(`,"key":"x}"`) + `}]}`, "lone '}' at byte 1"},
		{"control in key", `{"steps":[{"id":"a",` + eff(`,"key":"x\n"`) + `}]}`, "control byte 0x0a"},
		{"unknown dependency", `{"steps":[{"id":"a","depends_on":["b"],` + eff("") + `}]}`, `steps[0].depends_on: unknown step "b"`},
		{"self dependency", `{"steps":[{"id":"a","depends_on":["a"],` + eff("") + `}]}`, `steps[0].depends_on: step "a" depends on itself`},
		{"unknown bound step", `{"steps":[{"id":"a","inputs":{"x":{"step":"b","output":"body"}},` + eff("") + `}]}`, `steps[0].inputs.x: unknown step "b"`},
		{"binding without output", `{"steps":[{"id":"a","inputs":{"x":{"step":"b"}},` + eff("") + `}]}`, "steps[0].inputs.x.output: missing"},
		{"binding bad form", `{"steps":[{"id":"a","inputs":{"x":3},` + eff("") + `}]}`, "steps[0].inputs.x: want a reference"},
		{"bad input name", `{"steps":[{"id":"a","inputs":{"a/b":"` + prog + `"},` + eff("") + `}]}`, "steps[0].inputs.a/b: input name"},
		{"pel input names", `{"steps":[{"id":"a","inputs":{"x":"` + prog + `"},"pel":{"program":"` + prog + `"}}]}`, `steps[0].inputs.x: a PEL step's inputs are named 0, 1`},
		{"pel input gap", `{"steps":[{"id":"a","inputs":{"0":"` + prog + `","2":"` + prog + `"},"pel":{"program":"` + prog + `"}}]}`, `steps[0].inputs.2: a PEL step's inputs are 0..1 with none missing`},
		{"pel output name", `{"steps":[{"id":"a","pel":{"program":"` + prog + `"}},{"id":"b","inputs":{"x":{"step":"a","output":"body"}},` + eff("") + `}]}`, `steps[1].inputs.x: input "x": step "a" is a PEL step, whose outputs are named 0, 1`},
		{"cycle", `{"steps":[{"id":"c","depends_on":["a"],` + eff("") + `},{"id":"a","depends_on":["b"],` + eff("") + `},{"id":"b","depends_on":["c"],` + eff("") + `}]}`, `steps[1].depends_on: cycle: "a" depends on "b" depends on "c" depends on "a"`},
		{"cycle through binding", `{"steps":[{"id":"x",` + eff("") + `},{"id":"a","inputs":{"i":{"step":"b","output":"o"}},` + eff("") + `},{"id":"b","depends_on":["x","a"],` + eff("") + `}]}`, `cycle: "a" depends on "b" depends on "a"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Build([]byte(c.json))
			if !errors.Is(err, ErrInvalidPlan) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v\nwant …%s…", err, c.want)
			}
		})
	}
}

func TestBuildAccepts(t *testing.T) {
	t.Parallel()
	p := examplePlan(t)
	if len(p.Steps) != 3 {
		t.Fatalf("%+v", p)
	}
	fetch := p.Steps[1]
	if string(fetch.EffectParams) != `{"method":"GET","url":"http://127.0.0.1:8080/doc"}` {
		t.Fatalf("params not canonical: %s", fetch.EffectParams)
	}
	// external_send with cache reuse is accepted (§22.3 says why).
	if s := p.Steps[2]; s.Class != effect.ExternalSend || s.Cache != CacheReuse {
		t.Fatalf("%+v", s)
	}
	// The empty plan.
	if p, err := Build([]byte(`{"steps":[]}`)); err != nil || len(p.Steps) != 0 {
		t.Fatalf("%v %+v", err, p)
	}
}

func TestCanonicalParams(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{`{}`, `{}`},
		{` { "b" : 1 , "a" : [ true , false , null , 1.50 , -0 , 1e3 ] } `, `{"a":[true,false,null,1.50,-0,1e3],"b":1}`},
		{`{"s":"\u0041\u00e9\u2028\/\"\\\b\f\n\r\t\u0001\u001f\u007f"}`, "{\"s\":\"A\u00e9\u2028/\\\"\\\\\\b\\f\\n\\r\\t\\u0001\\u001f\u007f\"}"},
		{`{"z":{"b":{},"a":[]},"Z":0,"é":1,"e":2}`, `{"Z":0,"e":2,"z":{"a":[],"b":{}},"é":1}`},
	}
	for _, c := range cases {
		got, err := CanonicalParams([]byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("%s: got %s (%v), want %s", c.in, got, err, c.want)
		}
		if err := checkCanonicalParams(got); err != nil {
			t.Errorf("%s: canonical form not canonical: %v", c.in, err)
		}
	}
	for _, bad := range []string{``, `[]`, `1`, `{"a":1,"a":2}`, `{"a":1}x`, "{\"a\":\"\xff\"}", strings.Repeat(`{"a":`, 65) + `1` + strings.Repeat(`}`, 65)} {
		if _, err := CanonicalParams([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// DeriveKey's byte layout (§22.5), computed by hand, and StepKey's
// template expansion.
func TestKeys(t *testing.T) {
	t.Parallel()
	s := Step{ID: "fetch", Kind: EffectStep, Effect: "http", EffectParams: []byte(`{"url":"x"}`)}
	in := []effect.Input{{Name: "b", Ref: refWorld}, {Name: "a", Ref: refHello}}
	k := DeriveKey(s, in)
	if k != DeriveKey(s, []effect.Input{in[1], in[0]}) {
		t.Fatal("key depends on input order")
	}
	if k == DeriveKey(s, in[:1]) {
		t.Fatal("key ignores inputs")
	}
	if got := DeriveKey(s, in); got != derivedKeyGolden {
		t.Fatalf("DeriveKey = %s, want %s (SPECS §22.5)", got, derivedKeyGolden)
	}
	planRef := refProgram
	for tmpl, want := range map[string]string{
		"send:{input:a}":        "send:" + refHello.String(),
		"{kind}/{step}/{plan}":  "http/fetch/" + planRef.String(),
		"{{literal}} {derived}": "{literal} " + k,
		"p={params}":            "p=" + sha256Hex(`{"url":"x"}`),
		"}}{{":                  "}{",
	} {
		s.KeyTemplate = tmpl
		got, err := StepKey(s, planRef, in)
		if err != nil || got != want {
			t.Errorf("%s: got %q (%v), want %q", tmpl, got, err, want)
		}
	}
	s.KeyTemplate = "{input:missing}"
	if _, err := StepKey(s, planRef, in); !errors.Is(err, ErrKey) {
		t.Fatalf("missing input: %v", err)
	}
	s.KeyTemplate = ""
	if got, _ := StepKey(s, asl.Reference{}, in); got != k {
		t.Fatal("no template: not the derived key")
	}
}

// derivedKeyGolden is DeriveKey of TestKeys's step, computed outside Go
// (Python's hashlib over the bytes of §22.5 written out by hand).
const derivedKeyGolden = "b3de7c49139e803ea48ac64ddb12e45aa62ea49bc6526055649fc71de5a63c15"

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Hostile sizes stay linear: a 10,000-step chain builds, encodes and
// decodes; closing it into a 10,000-step cycle is found without
// recursion; params with 20,000 members parse in linear time.
func TestLargePlans(t *testing.T) {
	t.Parallel()
	const n = 10000
	eff := `"effect":{"kind":"k","params":{},"class":"read_only","gate":"none","retry":{"max_attempts":1,"base_ms":0,"cap_ms":0},"cache":"none"}`
	var b strings.Builder
	b.WriteString(`{"steps":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		dep := ""
		if i > 0 {
			dep = fmt.Sprintf(`"depends_on":["s%05d"],`, i-1)
		}
		fmt.Fprintf(&b, `{"id":"s%05d",%s%s}`, i, dep, eff)
	}
	b.WriteString(`]}`)
	p, err := Build([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodePlan(enc); err != nil {
		t.Fatal(err)
	}
	p.Steps[0].DependsOn = []string{fmt.Sprintf("s%05d", n-1)}
	if err := Validate(p); err == nil || !strings.Contains(err.Error(), `cycle: "s00000" depends on "s09999" depends on "s09998"`) {
		t.Fatalf("cycle: %.200v", err)
	}
	var params strings.Builder
	params.WriteByte('{')
	for i := 0; i < 20000; i++ {
		if i > 0 {
			params.WriteByte(',')
		}
		fmt.Fprintf(&params, `"m%d":%d`, i, i)
	}
	params.WriteByte('}')
	if _, err := CanonicalParams([]byte(params.String())); err != nil {
		t.Fatal(err)
	}
}
