package plan

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/enc"
	"github.com/amduat/amduat/plan/effect"
)

// Fixed references used by the examples: SHA-256 references of untagged
// "hello", "world" and "program".
var (
	refHello   = asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("hello")))
	refWorld   = asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("world")))
	refProgram = asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("program")))
)

// exampleJSON is the plan of §22.10's worked example.
const exampleJSON = `{"steps":[
 {"id":"send","inputs":{"body":{"step":"count","output":"0"}},
  "effect":{"kind":"http","params":{"url":"http://127.0.0.1:8080/count","method":"POST"},
   "class":"external_send","gate":"approval","retry":{"max_attempts":3,"base_ms":200,"cap_ms":5000},"cache":"reuse"}},
 {"id":"count","inputs":{"0":{"step":"fetch","output":"body"}},"pel":{"program":"` + "PROGRAM" + `"}},
 {"id":"fetch","effect":{"kind":"http","params":{"method":"GET","url":"http://127.0.0.1:8080/doc"},
   "class":"read_only","gate":"none","retry":{"max_attempts":5,"base_ms":100,"cap_ms":2000},"cache":"none","key":"fetch:{params}"}}
]}`

func examplePlan(t testing.TB) Plan {
	t.Helper()
	p, err := Build([]byte(strings.Replace(exampleJSON, "PROGRAM", refProgram.String(), 1)))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPlanRoundTrip(t *testing.T) {
	t.Parallel()
	p := examplePlan(t)
	b, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	q, err := DecodePlan(b)
	if err != nil {
		t.Fatalf("decode: %v\n%x", err, b)
	}
	again, err := q.Encode()
	if err != nil || !bytes.Equal(again, b) {
		t.Fatalf("re-encode: %v", err)
	}
	if got := []string{q.Steps[0].ID, q.Steps[1].ID, q.Steps[2].ID}; strings.Join(got, ",") != "count,fetch,send" {
		t.Fatalf("order %v", got)
	}
	if d := q.Steps[2].DependsOn; len(d) != 1 || d[0] != "count" {
		t.Fatalf("implicit dependency not added: %v", d)
	}
	r, err := Build(p.JSON())
	if err != nil {
		t.Fatalf("JSON form does not build: %v\n%s", err, p.JSON())
	}
	if rb, _ := r.Encode(); !bytes.Equal(rb, b) {
		t.Fatalf("JSON round trip changed the plan:\n%s", p.JSON())
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	t.Parallel()
	req := EffectRequest{Kind: "http", Params: []byte(`{"method":"GET"}`), Inputs: []effect.Input{{Name: "body", Ref: refHello}}, Key: "k1"}
	rec := Receipt{Kind: AttemptReceipt, Plan: refProgram, Execution: refWorld, Step: "fetch", Effect: "http", Request: refHello, Key: "k1",
		Attempt: 2, Outcome: FailedRetryable, ErrorClass: effect.RateLimited, Message: "429",
		Outputs: []effect.Output{{Name: "status", Ref: refHello}, {Name: "body", Ref: refWorld}}, Executor: "http", ExecutorVersion: "1", Start: -5, End: 1 << 62}
	sub := Submission{Plan: refProgram, Mode: Gated, Inputs: []effect.Input{{Name: "doc", Ref: refHello}}}
	ev := Event{Execution: refWorld, Seq: 2, Parent: refHello, Type: EventStepSucceeded, Step: "fetch", Attempt: 1, Receipt: refProgram,
		Outputs: []effect.Output{{Name: "body", Ref: refWorld}}, Time: 1700000000000000000}
	for name, c := range map[string]struct {
		enc func() ([]byte, error)
		dec func([]byte) (any, error)
	}{
		"request":    {req.Encode, func(b []byte) (any, error) { return DecodeEffectRequest(b) }},
		"receipt":    {rec.Encode, func(b []byte) (any, error) { return DecodeReceipt(b) }},
		"submission": {sub.Encode, func(b []byte) (any, error) { return DecodeSubmission(b) }},
		"event":      {ev.Encode, func(b []byte) (any, error) { return DecodeEvent(b) }},
	} {
		b, err := c.enc()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		v, err := c.dec(b)
		if err != nil {
			t.Fatalf("%s decode: %v", name, err)
		}
		var again []byte
		switch x := v.(type) {
		case EffectRequest:
			again, err = x.Encode()
		case Receipt:
			again, err = x.Encode()
		case Submission:
			again, err = x.Encode()
		case Event:
			again, err = x.Encode()
		}
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("%s: re-encode %v", name, err)
		}
		for i := 0; i < len(b); i++ {
			if _, err := c.dec(b[:i]); !errors.Is(err, enc.ErrMalformed) {
				t.Fatalf("%s: truncated at %d: %v", name, i, err)
			}
		}
	}
}
