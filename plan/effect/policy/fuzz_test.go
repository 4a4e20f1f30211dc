package policy

import (
	"bytes"
	"os"
	"testing"
)

// FuzzParse: any input yields a policy or an error, never a panic; a
// policy's canonical bytes parse to the same canonical bytes.
func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile("testdata/policy.json"); err == nil {
		f.Add(b)
	}
	for _, s := range []string{
		`{"version":1}`,
		`{"version":1,"http":{"hosts":[{"host":"*.a.b:*","schemes":["http"]}]}}`,
		`{"version":1,"http":{"hosts":[{"host":"[::1]:80"}]}}`,
		`{"version":1,"exec":{"commands":[{"name":"sh","path":"/bin/sh","env":["A"]}]}}`,
		`{"version":1,"executors":[{"name":"x","path":"/bin/sh","args":["-c"]}]}`,
		`{"version":1,"http":{"hosts":[{"host":"a","timeout_ms":1e400}]}}`,
		`{"version":1,"http":{"hosts":[{"host":"a","max_response_bytes":9223372036854775808}]}}`,
		`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			return
		}
		q, err := Parse(p.Canonical())
		if err != nil {
			t.Fatalf("canonical bytes %s do not parse: %v", p.Canonical(), err)
		}
		if !bytes.Equal(p.Canonical(), q.Canonical()) {
			t.Fatalf("canonical bytes not a fixed point:\n%s\n%s", p.Canonical(), q.Canonical())
		}
	})
}
