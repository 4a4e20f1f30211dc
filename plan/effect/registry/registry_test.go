package registry

import (
	"testing"

	"github.com/amduat/amduat/plan/effect"
	"github.com/amduat/amduat/plan/effect/policy"
)

func TestExecutors(t *testing.T) {
	p, err := policy.Parse([]byte(`{"version":1,"executors":[
		{"name":"model","path":"/bin/cat","honours_keys":true},
		{"name":"db","path":"/bin/cat"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	xs, err := Executors(p)
	if err != nil {
		t.Fatal(err)
	}
	defer Close(xs)
	want := []struct {
		name  string
		honor bool
	}{{"http", true}, {"exec", false}, {"model", true}, {"db", false}}
	if len(xs) != len(want) {
		t.Fatalf("%d executors, want %d", len(xs), len(want))
	}
	for i, x := range xs {
		k, ok := x.(effect.KeyHonouring)
		if x.Name() != want[i].name || !ok || k.HonoursKeys() != want[i].honor {
			t.Errorf("executor %d: %s honours keys %v, want %s %v", i, x.Name(), ok && k.HonoursKeys(), want[i].name, want[i].honor)
		}
	}
	if _, err := Executors(nil); err == nil {
		t.Fatal("no error for a nil policy")
	}
}
