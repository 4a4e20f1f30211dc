package httpstore

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/amduat/amduat/asl"
)

func someRefs(n int) []asl.Reference {
	refs := make([]asl.Reference, n)
	for i := range refs {
		id := asl.HashSHA256
		if i%3 == 2 {
			id = asl.HashBLAKE3
		}
		refs[i] = asl.MustDerive(id, asl.Untagged([]byte{byte(i), byte(i >> 8)}))
	}
	return refs
}

// TestAppendRefsJSON: the hand-written acknowledgement is byte for byte
// what encoding/json writes for RefsBody and MissingResponse, and
// parseRefsJSON reads it back.
func TestAppendRefsJSON(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 2, 1000} {
		refs := someRefs(n)
		for _, c := range []struct {
			key string
			v   any
		}{{"refs", RefsBody{Refs: refs}}, {"missing", MissingResponse{Missing: refs}}} {
			want, err := json.Marshal(c.v)
			if err != nil {
				t.Fatal(err)
			}
			got := AppendRefsJSON(nil, c.key, refs)
			if !bytes.Equal(got, want) {
				t.Fatalf("%s, %d refs:\n got %.200s\nwant %.200s", c.key, n, got, want)
			}
			back, ok := parseRefsJSON(append(got, '\n'), c.key)
			if !ok || !slices.Equal(back, refs) || back == nil {
				t.Fatalf("%s, %d refs: parsed back %v (ok %v)", c.key, n, back, ok)
			}
		}
	}
	if got := AppendRefsJSON(nil, "refs", nil); string(got) != `{"refs":[]}` {
		t.Fatalf("nil refs: %s", got)
	}
}

// TestDecodeRefsFallback: an answer that is not exactly the server's form
// is decoded by encoding/json, with its value or its error.
func TestDecodeRefsFallback(t *testing.T) {
	t.Parallel()
	r := someRefs(2)
	a, b := r[0].String(), r[1].String()
	for _, c := range []struct {
		body string
		want []asl.Reference
		fail bool
	}{
		{`{"refs":["` + a + `","` + b + `"]}`, r, false},
		{` { "refs" : [ "` + a + `" , "` + b + `" ] } `, r, false},
		{`{"refs":["` + a + `"],"refs":["` + b + `"]}`, r[1:], false},
		{`{"refs":["\u0030` + a[1:] + `"]}`, r[:1], false},
		{`{"refs":null}`, nil, false},
		{`{"refs":["` + a + `"]} {}`, nil, true},
		{`{"refs":["` + a[:5] + `"]}`, nil, true},
		{`{"refs":["` + a + `"]`, nil, true},
		{`{"refs":[` + a + `]}`, nil, true},
	} {
		var rb RefsBody
		err := decodeJSON(bytes.NewReader([]byte(c.body)), &rb)
		if (err != nil) != c.fail || !c.fail && !slices.Equal(rb.Refs, c.want) {
			t.Errorf("%s: refs %v, error %v", c.body, rb.Refs, err)
		}
	}
}

// FuzzParseRefsJSON: whenever the fast parser accepts a body, encoding/json
// accepts it too with the same references.
func FuzzParseRefsJSON(f *testing.F) {
	refs := someRefs(3)
	f.Add(AppendRefsJSON(nil, "refs", refs))
	f.Add(append(AppendRefsJSON(nil, "refs", nil), "\n\t "...))
	f.Add([]byte(`{"refs":["0001"]}`))
	f.Add([]byte(`{"refs":["` + refs[0].String() + `",]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := parseRefsJSON(b, "refs")
		if !ok {
			return
		}
		var rb RefsBody
		if err := json.Unmarshal(b, &rb); err != nil {
			t.Fatalf("fast parser accepted %q, encoding/json refuses it: %v", b, err)
		}
		if !slices.Equal(got, rb.Refs) {
			t.Fatalf("%q: fast %v, encoding/json %v", b, got, rb.Refs)
		}
	})
}
