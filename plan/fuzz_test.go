package plan

import (
	"bytes"
	"strings"
	"testing"

	"github.com/amduat/amduat/plan/effect"
)

// seeds returns valid encodings of every kind, for the fuzz corpora.
func seedRecords(t testing.TB) (planB, reqB, recB, subB, evB []byte) {
	p := examplePlan(t)
	var err error
	if planB, err = p.Encode(); err != nil {
		t.Fatal(err)
	}
	req := EffectRequest{Kind: "http", Params: []byte(`{"a":[1,{"b":"c"}]}`), Inputs: []effect.Input{{Name: "body", Ref: refHello}}, Key: "k"}
	if reqB, err = req.Encode(); err != nil {
		t.Fatal(err)
	}
	rec := Receipt{Kind: AttemptReceipt, Plan: refProgram, Execution: refWorld, Step: "s", Effect: "http", Request: refHello, Key: "k",
		Attempt: 1, Outcome: Succeeded, Outputs: []effect.Output{{Name: "body", Ref: refWorld}}, Executor: "http", ExecutorVersion: "1", Start: 1, End: 2}
	if recB, err = rec.Encode(); err != nil {
		t.Fatal(err)
	}
	sub := Submission{Plan: refProgram, Mode: Auto, Inputs: []effect.Input{{Name: "x", Ref: refHello}}, Label: "again"}
	if subB, err = sub.Encode(); err != nil {
		t.Fatal(err)
	}
	ev := Event{Execution: refWorld, Seq: 3, Parent: refHello, Type: EventStepFailed, Step: "s", ErrorClass: effect.InvalidInput, Reason: "bad", Time: 7}
	if evB, err = ev.Encode(); err != nil {
		t.Fatal(err)
	}
	return
}

// addMutations seeds f with b, its truncations at a few places, and a
// huge count at the first count.
func addMutations(f *testing.F, b []byte) {
	f.Add(b)
	for _, n := range []int{0, 1, 5, len(b) / 2, len(b) - 1} {
		if n >= 0 && n <= len(b) {
			f.Add(b[:n])
		}
	}
	f.Add(append(bytes.Clone(b), 0))
	huge := bytes.Clone(b)
	if len(huge) > 5 {
		copy(huge[1:5], []byte{0xff, 0xff, 0xff, 0xff})
		f.Add(huge)
	}
}

// roundTrip fails t unless decoding b gives a value that re-encodes to b.
func roundTrip[T any](t *testing.T, b []byte, dec func([]byte) (T, error), enc func(T) ([]byte, error)) {
	v, err := dec(b)
	if err != nil {
		return
	}
	again, err := enc(v)
	if err != nil {
		t.Fatalf("accepted %x does not re-encode: %v", b, err)
	}
	if !bytes.Equal(again, b) {
		t.Fatalf("accepted %x re-encodes to %x", b, again)
	}
}

// FuzzDecodePlan: DecodePlan never panics, and whatever it accepts
// satisfies Validate and encodes back to the same bytes (§22.2).
func FuzzDecodePlan(f *testing.F) {
	b, _, _, _, _ := seedRecords(f)
	addMutations(f, b)
	f.Add([]byte{1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodePlan(b)
		if err != nil {
			return
		}
		if err := Validate(p); err != nil {
			t.Fatalf("accepted plan does not validate: %v", err)
		}
		roundTrip(t, b, DecodePlan, Plan.Encode)
	})
}

func FuzzDecodeEffectRequest(f *testing.F) {
	_, b, _, _, _ := seedRecords(f)
	addMutations(f, b)
	f.Fuzz(func(t *testing.T, b []byte) { roundTrip(t, b, DecodeEffectRequest, EffectRequest.Encode) })
}

func FuzzDecodeReceipt(f *testing.F) {
	_, _, b, _, _ := seedRecords(f)
	addMutations(f, b)
	f.Fuzz(func(t *testing.T, b []byte) { roundTrip(t, b, DecodeReceipt, Receipt.Encode) })
}

func FuzzDecodeSubmission(f *testing.F) {
	_, _, _, b, _ := seedRecords(f)
	addMutations(f, b)
	f.Fuzz(func(t *testing.T, b []byte) { roundTrip(t, b, DecodeSubmission, Submission.Encode) })
}

func FuzzDecodeEvent(f *testing.F) {
	_, _, _, _, b := seedRecords(f)
	addMutations(f, b)
	f.Fuzz(func(t *testing.T, b []byte) { roundTrip(t, b, DecodeEvent, Event.Encode) })
}

// FuzzBuild: Build never panics; a plan it accepts encodes, decodes to
// itself, and its JSON form builds to the same bytes.
func FuzzBuild(f *testing.F) {
	f.Add([]byte(strings.Replace(exampleJSON, "PROGRAM", refProgram.String(), 1)))
	f.Add([]byte(`{"steps":[]}`))
	f.Add([]byte(`{"steps":[{"id":"a","effect":{"kind":"k","params":{"x":[1,2,{"y":null}]},"class":"produce_outcome","gate":"approval","retry":{"max_attempts":2,"base_ms":1,"cap_ms":9},"cache":"reuse","key":"{{{kind}}}"}}]}`))
	f.Add([]byte(strings.Repeat("[", 100)))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Build(data)
		if err != nil {
			return
		}
		b, err := p.Encode()
		if err != nil {
			t.Fatalf("built plan does not encode: %v", err)
		}
		q, err := DecodePlan(b)
		if err != nil {
			t.Fatalf("built plan does not decode: %v", err)
		}
		r, err := Build(q.JSON())
		if err != nil {
			t.Fatalf("JSON form does not build: %v\n%s", err, q.JSON())
		}
		if rb, _ := r.Encode(); !bytes.Equal(rb, b) {
			t.Fatalf("JSON form changes the plan:\n%s", q.JSON())
		}
	})
}
