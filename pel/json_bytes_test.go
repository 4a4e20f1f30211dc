package pel_test

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/amduat/amduat/internal/progtest"
	"github.com/amduat/amduat/pel"
)

// sameAsProgramFromJSON checks ProgramBytesFromJSON against
// EncodeProgram(ProgramFromJSON): the same bytes and counts, or the same
// error text.
func sameAsProgramFromJSON(t *testing.T, src []byte) {
	t.Helper()
	b, nodes, roots, err := pel.ProgramBytesFromJSON(src, nil)
	p, werr := pel.ProgramFromJSON(src, nil)
	if sb, sn, sr, ok := pel.ProgramBytesFromJSONReader(bytes.NewReader(src), 0, nil); ok {
		// The reader's path accepts only what the whole text's accepts.
		if werr != nil || err != nil || !bytes.Equal(sb, b) || sn != nodes || sr != roots {
			t.Fatalf("%.200s: the reader's path accepted it with %d nodes, %d roots; ProgramFromJSON: %v", src, sn, sr, werr)
		}
	}
	if werr != nil {
		if err == nil || err.Error() != werr.Error() {
			t.Fatalf("%.200s: error %v, want %v", src, err, werr)
		}
		return
	}
	want, werr := pel.EncodeProgram(p)
	if werr != nil {
		t.Fatal(werr)
	}
	if err != nil || !bytes.Equal(b, want) || nodes != len(p.Nodes) || roots != len(p.Roots) {
		t.Fatalf("%.200s: %d nodes %d roots, %v; want %d, %d and the bytes of EncodeProgram", src, nodes, roots, err, len(p.Nodes), len(p.Roots))
	}
}

var jsonBytesCorpus = []string{
	`{}`, `{"nodes":[]}`, `{"roots":[],"nodes":[]}`, `{`, `null`, ` [] `, `1`,
	`{"nodes":[],"roots":[]} {}`, `{"nodes":[],"roots":[]}}`, `{"nodes":[],"roots":[],"x":1}`,
	`{"nodes":null}`, `{"nodes":{}}`, `{"roots":null}`, `{"nodes":[null]}`, `{"nodes":[],"roots":[null]}`,
	`{"Nodes":[]}`, `{"rootſ":[]}`, `{"nodes":[],"nodes":[]}`, `{"nod\u0065s":[]}`,
	`{"roots":[{"node":2}],"nodes":[{"id":1,"op":"pel.bytes.const","version":1,"params":{"text":"a"}},{"id":2,"op":"pel.bytes.hash.asl1","version":1,"inputs":[{"node":1}]}]}`,
	`{"nodes":[{"id":2,"op":"pel.bytes.const","version":1},{"id":1,"op":"pel.bytes.const","version":1}],"roots":[{"node":1,"output":0}]}`,
	`{"nodes":[{"id":1,"op":"x","version":1},{"id":1,"op":"y","version":1}]}`,
	`{"nodes":[{"id":1,"op":"pel.bytes.hash.asl1","version":1,"inputs":null}]}`,
	`{"nodes":[{"id":1,"op":"pel.bytes.hash.asl1","version":1,"inputs":[null]}]}`,
	`{"nodes":[{"id":1,"op":"pel.bytes.hash.asl1","version":1,"inputs":[{}]}]}`,
	`{"nodes":[{"id":1,"op":"pel.bytes.hash.asl1","version":1,"inputs":[{"input":0,"node":1}]}]}`,
	`{"nodes":[{"ID":1,"op":"pel.bytes.const","version":1}]}`,
	`{"nodes":[{"id":1,"id":2,"op":"acme.x","version":1}]}`,
	`{"nodes":[{"id":1,"op":"pel.bytes.const","version":1,"params":{"TEXT":"a"}}]}`,
	`{"nodes":[{"id":1,"op":"pel.bytes.slice","version":1,"params":{"offset":1}}]}`,
	`{"nodes":[{"id":1,"op":"acme.x","version":1,"params":{"raw":"zz"}}]}`,
	`{"nodes":[{"id":1,"op":"acme.x","version":1,"params":{"raw":"00ff"}},{"id":7,"op":"acme.x","version":2,"params":null}]}`,
	`{"nodes":[{"id":-1,"op":"pel.bytes.const","version":1}]}`,
	`{"nodes":[{"id":4294967296,"op":"pel.bytes.const","version":1}]}`,
	`{"nodes":[{"op":"pel.bytes.const","version":1}]}`,
	`{"nodes":[{"id":1,"op":"","version":1}]}`,
	`{"nodes":[],"roots":[{"output":1}]}`,
	`{"nodes":[],"roots":[{"node":1,"input":0}]}`,
	`{"nodes":[{"id":1,"op":"pel.bytes.const","version":1,"extra":0}]}`,
}

// TestProgramBytesFromJSON: the streaming encoder gives EncodeProgram's
// bytes for every program ProgramFromJSON accepts, listed in order or not,
// and ProgramFromJSON's error for every text it refuses.
func TestProgramBytesFromJSON(t *testing.T) {
	t.Parallel()
	for _, src := range jsonBytesCorpus {
		sameAsProgramFromJSON(t, []byte(src))
	}
	for _, name := range pel.SeedNames() {
		p, _ := pel.Seed(name)
		j, err := pel.ProgramToJSON(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		sameAsProgramFromJSON(t, j)
	}
	r := rand.New(rand.NewPCG(22, 4))
	shape := progtest.Shape{InputSizes: []uint64{3, 10}, HasParams: true, ParamsSize: 2, MaxNodes: 40}
	for i := 0; i < 100; i++ {
		j, err := pel.ProgramToJSON(progtest.Random(r, shape), nil)
		if err != nil {
			t.Fatal(err)
		}
		sameAsProgramFromJSON(t, j)
		// The same nodes in reverse order: the general path.
		lines := strings.Split(string(j), "\n")
		if len(lines) > 4 {
			sameAsProgramFromJSON(t, []byte(strings.Replace(string(j), lines[1], strings.TrimSuffix(lines[2], ",")+",", 1)))
		}
	}
}

func FuzzProgramBytesFromJSON(f *testing.F) {
	for _, src := range jsonBytesCorpus {
		f.Add([]byte(src))
	}
	f.Fuzz(func(t *testing.T, b []byte) { sameAsProgramFromJSON(t, b) })
}
