package plan

import (
	"bufio"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/plan/effect"
)

// workedJSON is the plan of the worked examples of SPECS.md §22.10 (the
// same plan as the vector plan.build.example).
const workedJSON = `{"steps":[
  {"id":"fetch","effect":{"kind":"http","params":{"url":"http://127.0.0.1/doc"},"class":"read_only","gate":"none",
   "retry":{"max_attempts":3,"base_ms":200,"cap_ms":5000},"cache":"reuse"}},
  {"id":"count","inputs":{"0":{"step":"fetch","output":"body"}},"pel":{"program":"00011b2564b4c0314239dfe740c4d10ee7e4f380aa19d20510982becfeb1a01b5580"}}
]}`

// workedArtifacts builds the chain of §22.10: the plan, its submission
// (gated), the first event of the execution, the request of the fetch
// step and the receipt of its first attempt.
func workedArtifacts(t *testing.T) [][2]string {
	t.Helper()
	must := func(a asl.Artifact, err error) (asl.Artifact, asl.Reference) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a, asl.MustDerive(asl.HashSHA256, a)
	}
	p, err := Build([]byte(workedJSON))
	if err != nil {
		t.Fatal(err)
	}
	pa, pref := must(p.Artifact())
	sa, exec := must(Submission{Plan: pref, Mode: Gated}.Artifact())
	ea, _ := must(Event{Execution: exec, Seq: 1, Type: EventSubmitted, Time: 1764201600000000000}.Artifact())
	fetch := p.Steps[1]
	key, err := StepKey(fetch, pref, nil)
	if err != nil {
		t.Fatal(err)
	}
	qa, qref := must(EffectRequest{Kind: fetch.Effect, Params: fetch.EffectParams, Key: key}.Artifact())
	body := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("one two three")))
	status := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("200")))
	ra, _ := must(Receipt{Kind: AttemptReceipt, Plan: pref, Execution: exec, Step: "fetch", Effect: "http", Request: qref, Key: key,
		Attempt: 1, Outcome: Succeeded, Outputs: []effect.Output{{Name: "status", Ref: status}, {Name: "body", Ref: body}},
		Executor: "http", ExecutorVersion: "1", Start: 1764201600000000000, End: 1764201600250000000}.Artifact())
	var out [][2]string
	for _, x := range []struct {
		name string
		a    asl.Artifact
	}{{"plan", pa}, {"submission", sa}, {"event", ea}, {"request", qa}, {"receipt", ra}} {
		out = append(out, [2]string{x.name, hex.EncodeToString(x.a.Bytes)}, [2]string{x.name + ".ref", asl.MustDerive(asl.HashSHA256, x.a).String()})
	}
	return append(out, [2]string{"key", key})
}

// TestWorkedExamples: the bytes and references of §22.10, against
// testdata/worked.txt (frozen: a difference is a change of bytes, which
// changes SPECS.md and the vectors too).
func TestWorkedExamples(t *testing.T) {
	t.Parallel()
	f, err := os.Open("testdata/worked.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if name, val, ok := strings.Cut(sc.Text(), " "); ok && !strings.HasPrefix(name, "#") {
			want[name] = val
		}
	}
	got := workedArtifacts(t)
	if len(want) != len(got) {
		t.Errorf("testdata/worked.txt has %d lines, want %d", len(want), len(got))
	}
	for _, kv := range got {
		if want[kv[0]] != kv[1] {
			t.Errorf("%s:\n got %s\nwant %s", kv[0], kv[1], want[kv[0]])
		}
	}
}
