package webui_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/internal/golden"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/server/webui"
	"github.com/amduat/amduat/surf"
	"github.com/amduat/amduat/tgk"
)

const prefix = "/ui/"

func rawURL(r asl.Reference) string { return "/v1/artifacts/" + r.String() }

func newHandler(s asl.Store) http.Handler {
	return webui.New(s, webui.Options{Prefix: prefix, RawURL: rawURL})
}

func page(ref asl.Reference) string { return prefix + "a/" + ref.String() }

// checkHeaders asserts the security headers every response carries.
func checkHeaders(t *testing.T, res *http.Response) {
	t.Helper()
	if got := res.Header.Get("Content-Security-Policy"); got != "default-src 'self'; style-src 'self'" {
		t.Errorf("Content-Security-Policy = %q", got)
	}
	if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("X-Content-Type-Options = %q", got)
	}
}

func expect(t *testing.T, h http.Handler, path string, status int, contains ...string) string {
	t.Helper()
	res, body := get(t, h, http.MethodGet, path)
	checkHeaders(t, res)
	if res.StatusCode != status {
		t.Fatalf("GET %s: status %d, want %d\n%s", path, res.StatusCode, status, body)
	}
	for _, c := range contains {
		if !strings.Contains(body, c) {
			t.Errorf("GET %s: body lacks %q", path, c)
		}
	}
	return body
}

// TestGolden pins the HTML of a program page and of result pages (one OK,
// one failed at runtime) byte for byte, and checks that a second store with
// the same content renders the same bytes.
func TestGolden(t *testing.T) {
	t.Parallel()
	f := newFixture(t, memstore.New())
	again := newFixture(t, memstore.New())
	for _, tt := range []struct {
		file string
		ref  func(*fixture) asl.Reference
	}{
		{"program.html", func(f *fixture) asl.Reference { return f.greet }},
		{"result_ok.html", func(f *fixture) asl.Reference { return f.greetOK.ResultRef }},
		{"result_failed.html", func(f *fixture) asl.Reference { return f.brokenRun.ResultRef }},
	} {
		t.Run(tt.file, func(t *testing.T) {
			body := expect(t, newHandler(f.s), page(tt.ref(f)), http.StatusOK)
			golden.Check(t, "testdata/"+tt.file, []byte(body))
			if second := expect(t, newHandler(again.s), page(tt.ref(again)), http.StatusOK); second != body {
				t.Fatal("a store with the same content rendered different bytes")
			}
		})
	}
}

// nodeClass matches the class attribute of a DAG node box; group 1 is its
// status class.
var nodeClass = regexp.MustCompile(`<g class="node[^"]*?(?: (st-[a-z]+))?" data-node=`)

// statuses counts the DAG node boxes by status class ("" for none).
func statuses(body string) map[string]int {
	m := map[string]int{}
	for _, g := range nodeClass.FindAllStringSubmatch(body, -1) {
		m[g[1]]++
	}
	return m
}

// TestRunPages checks what result, trace, program and edge pages say about
// real runs: statuses, node colours, links and output previews.
func TestRunPages(t *testing.T) {
	t.Parallel()
	f := newFixture(t, memstore.New())
	h := newHandler(f.s)

	t.Run("ok result", func(t *testing.T) {
		r := f.greetOK
		body := expect(t, h, page(r.ResultRef), http.StatusOK,
			`<span class="badge st-ok">OK</span>`,
			`href="`+page(f.greet)+`"`, // program
			`href="`+page(f.b)+`"`,     // input
			`href="`+page(r.TraceRef)+`"`,
			`href="`+rawURL(r.OutputRefs[0])+`"`,
			"Dear amduat\n", // the text output's preview
			"binary, 32 bytes",
			"pel.bytes.concat@1", "pel.bytes.hash.asl1@1", "pel.bytes.const@1",
			`{&#34;text&#34;:&#34;Dear &#34;}`, // readable const params
		)
		if got := statuses(body); !maps.Equal(got, map[string]int{"st-ok": 3}) {
			t.Errorf("DAG nodes by status: %v, want 3 OK", got)
		}
	})

	t.Run("runtime failure", func(t *testing.T) {
		body := expect(t, h, page(f.brokenRun.ResultRef), http.StatusOK,
			`<span class="badge st-failed">RUNTIME_FAILED</span>`,
			"slice offset 100 &#43; length 3 exceeds input length 14",
			"not evaluated",
		)
		if got, want := statuses(body), map[string]int{"st-ok": 2, "st-failed": 1, "st-skipped": 1}; !maps.Equal(got, want) {
			t.Errorf("DAG nodes by status: %v, want %v", got, want)
		}
		if strings.Contains(body, "<h2>Outputs</h2>") {
			t.Error("a failed run lists outputs")
		}
	})

	t.Run("invalid inputs", func(t *testing.T) {
		body := expect(t, h, page(f.concatBad.ResultRef), http.StatusOK,
			"INVALID_INPUTS", "not given", "external input index 1 out of range")
		if got := statuses(body); !maps.Equal(got, map[string]int{"st-failed": 1}) {
			t.Errorf("DAG nodes by status: %v, want 1 failed", got)
		}
	})

	t.Run("store failure", func(t *testing.T) {
		missing := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("never stored")))
		r := run(t, f.s, surf.Request{ProgramRef: f.concat, InputRefs: []asl.Reference{f.a, missing}})
		body := expect(t, h, page(r.ResultRef), http.StatusOK,
			"Store failure", "ERR_NOT_FOUND", `href="`+page(missing)+`"`)
		if got := statuses(body); !maps.Equal(got, map[string]int{"st-skipped": 1}) {
			t.Errorf("DAG nodes by status: %v, want 1 not evaluated", got)
		}
		// The missing input's own page is a 404.
		expect(t, h, page(missing), http.StatusNotFound, "artifact not found")

		// A run of a missing program: its result and trace say so.
		r = run(t, f.s, surf.Request{ProgramRef: missing})
		expect(t, h, page(r.ResultRef), http.StatusOK, "INVALID_PROGRAM", "The program cannot be shown: it is not in this store (ERR_NOT_FOUND).")
		expect(t, h, page(r.TraceRef), http.StatusOK, "Node records", "The program cannot be shown: it is not in this store (ERR_NOT_FOUND).")
	})

	t.Run("trace", func(t *testing.T) {
		body := expect(t, h, page(f.brokenRun.TraceRef), http.StatusOK,
			"trace", `href="`+page(f.brokenRun.ResultRef)+`"`, "RUNTIME_FAILED")
		if got, want := statuses(body), map[string]int{"st-ok": 2, "st-failed": 1, "st-skipped": 1}; !maps.Equal(got, want) {
			t.Errorf("DAG nodes by status: %v, want %v", got, want)
		}
	})

	t.Run("program", func(t *testing.T) {
		body := expect(t, h, page(f.concat), http.StatusOK,
			"pel.bytes.concat@1", "input 0", "input 1", "valid", `class="node root"`)
		if got := statuses(body); !maps.Equal(got, map[string]int{"": 1}) {
			t.Errorf("DAG nodes by status: %v, want 1 uncoloured", got)
		}
	})

	t.Run("edge and provenance", func(t *testing.T) {
		r := f.greetOK
		body := expect(t, h, page(r.EdgeRef), http.StatusOK,
			"provenance edge", "PEL_RUN", `href="`+page(f.greet)+`"`, `href="`+page(r.ResultRef)+`"`)
		_ = body
		// The output's page says which run produced it, the input's page
		// which runs used it.
		expect(t, h, page(r.OutputRefs[0]), http.StatusOK,
			"Why: runs that produced it", `href="`+page(r.EdgeRef)+`"`, `href="`+page(f.greet)+`"`)
		in := expect(t, h, page(f.a), http.StatusOK, "Uses: runs that used it",
			`href="`+page(f.concatOK.EdgeRef)+`"`, `href="`+page(f.brokenRun.EdgeRef)+`"`)
		if !strings.Contains(in, "No recorded run produced this artifact.") {
			t.Error("an input's page does not say that no run produced it")
		}
	})

	t.Run("scheme descriptor", func(t *testing.T) {
		d := put(t, f.s, pel.SchemeDescriptor())
		expect(t, h, page(d), http.StatusOK, "PEL/PROGRAM-DAG/1", "SchemeRef_DAG_1")
	})
}

// TestStatuses checks the search page and the 400, 404, 405 and 500 pages.
func TestStatuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := memstore.New()
	h := newHandler(s)
	hello := put(t, s, asl.Untagged([]byte("hello")))
	missing := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("absent")))

	expect(t, h, prefix, http.StatusOK, `<form class="search big" method="get" action="/ui/">`, `name="ref"`)
	expect(t, h, "/ui", http.StatusOK, "Find an artifact")

	res, _ := get(t, h, http.MethodGet, prefix+"?ref=+"+strings.ToUpper(hello.String())+"+")
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != page(hello) {
		t.Fatalf("search for a stored ref: %d Location %q", res.StatusCode, res.Header.Get("Location"))
	}
	expect(t, h, prefix+"?ref=xyz", http.StatusBadRequest, "malformed reference", "This is not a reference")
	expect(t, h, prefix+"?ref=", http.StatusBadRequest, "no reference given")
	expect(t, h, prefix+"?ref="+missing.String(), http.StatusNotFound, "artifact not found", "ERR_NOT_FOUND", missing.String())
	expect(t, h, prefix+"a/0001abc", http.StatusBadRequest, "malformed reference")
	expect(t, h, prefix+"a/0000"+strings.Repeat("00", 32), http.StatusBadRequest, "malformed reference")
	expect(t, h, page(missing), http.StatusNotFound, "artifact not found")
	unknown, _ := asl.DecodeReference([]byte{0x77, 0x77, 1, 2})
	expect(t, h, page(unknown), http.StatusBadRequest, "ERR_UNSUPPORTED")
	expect(t, h, prefix+"nothing/here", http.StatusNotFound, "not found")
	expect(t, h, "/elsewhere", http.StatusNotFound, "not found")
	expect(t, h, page(hello)+"/more", http.StatusNotFound)

	res, _ = get(t, h, http.MethodPost, page(hello))
	if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
		t.Fatalf("POST: %d Allow %q", res.StatusCode, res.Header.Get("Allow"))
	}
	res, body := get(t, h, http.MethodHead, page(hello))
	if res.StatusCode != http.StatusOK || body != "" {
		t.Fatalf("HEAD: %d, %d body bytes", res.StatusCode, len(body))
	}

	res, css := get(t, h, http.MethodGet, prefix+"static/style.css")
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/css") || !strings.Contains(css, "svg.dag") {
		t.Fatalf("style sheet: %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}

	// A damaged artifact: 500, ERR_INTEGRITY, and none of its bytes.
	secret := put(t, s, asl.Untagged([]byte("original text")))
	s.Corrupt(secret, []byte("DAMAGED BYTES"))
	body = expect(t, h, page(secret), http.StatusInternalServerError, "ERR_INTEGRITY", secret.String())
	if strings.Contains(body, "DAMAGED") || strings.Contains(body, "original") {
		t.Fatal("the 500 page shows stored bytes")
	}
	// A damaged program is refused the same way.
	prog, _ := pel.SeedArtifact(pel.SeedConst)
	pref := put(t, s, prog)
	s.Corrupt(pref, []byte("x"))
	expect(t, h, page(pref), http.StatusInternalServerError, "ERR_INTEGRITY")

	// A damaged output on a result page is reported in place.
	in := put(t, s, asl.Untagged([]byte("in")))
	r := run(t, s, surf.Request{ProgramRef: put(t, s, mustSeed(t, pel.SeedConcat1)), InputRefs: []asl.Reference{in}})
	s.Corrupt(r.OutputRefs[0], []byte("zz"))
	expect(t, h, page(r.ResultRef), http.StatusOK, "damaged: its stored bytes do not match its reference (ERR_INTEGRITY)")
	_ = ctx
}

func mustSeed(t testing.TB, name string) asl.Artifact {
	t.Helper()
	a, err := pel.SeedArtifact(name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestEscaping stores hostile bytes where a page shows them: text
// contents, an operation name, a diagnostic. None reaches the page as markup.
func TestEscaping(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	h := newHandler(s)
	const hostile = `<script>alert("x")</script><img src=x onerror=alert(1)>`
	txt := put(t, s, asl.Untagged([]byte(hostile+"\n& more")))
	body := expect(t, h, page(txt), http.StatusOK, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;", "&amp; more")
	checkNoMarkup(t, body)

	// An unknown operation whose name is markup, with params bytes.
	p := pel.Program{
		Nodes: []pel.Node{{ID: 1, Op: pel.OperationID{Name: hostile + "\x01\u202e", Version: 7}, Params: []byte("<b>")}},
		Roots: []pel.RootRef{{NodeID: 1}},
	}
	art, err := pel.ProgramArtifact(p)
	if err != nil {
		t.Fatal(err)
	}
	pref := put(t, s, art)
	body = expect(t, h, page(pref), http.StatusOK, "not valid", `\x01\u202e@7`, "3c623e")
	checkNoMarkup(t, body)

	// Running it fails with a diagnostic naming the operation.
	r := run(t, s, surf.Request{ProgramRef: pref})
	body = expect(t, h, page(r.ResultRef), http.StatusOK, "INVALID_PROGRAM")
	checkNoMarkup(t, body)

	// A query echoed back on the error page.
	res, body := get(t, h, http.MethodGet, prefix+"?ref=%3Cscript%3Ealert(1)%3C/script%3E")
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d", res.StatusCode)
	}
	checkNoMarkup(t, body)
}

func checkNoMarkup(t *testing.T, body string) {
	t.Helper()
	for _, bad := range []string{"<script", "<img", "<b>", "\x01", "\u202e"} {
		if strings.Contains(body, bad) {
			t.Errorf("page contains %q unescaped", bad)
		}
	}
}

// TestPreviews checks text, binary, empty, truncated and undecodable
// previews, the download links, and MaxPreview.
func TestPreviews(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	h := webui.New(s, webui.Options{Prefix: "ui", RawURL: rawURL, MaxPreview: 10})
	text := put(t, s, asl.Untagged([]byte("héllo wörld, and more")))
	expect(t, h, page(text), http.StatusOK, "héllo wö", "the first 10 bytes of 23 bytes", `href="`+rawURL(text)+`"`, "Download the bytes")

	bin := make([]byte, 300)
	for i := range bin {
		bin[i] = byte(i)
	}
	binRef := put(t, s, asl.Tagged(0x42, bin))
	body := expect(t, h, page(binRef), http.StatusOK, "binary, 300 bytes", "the first 256 bytes of 300 bytes",
		"00000000", "00 01 02 03 04 05 06 07  08 09 0a 0b 0c 0d 0e 0f", "000000f0", "0x00000042")
	if strings.Contains(body, "00000100") {
		t.Error("hex preview goes past 256 bytes")
	}
	empty := put(t, s, asl.Untagged(nil))
	expect(t, h, page(empty), http.StatusOK, "Empty: 0 bytes.")

	junk := put(t, s, asl.Tagged(asl.TagPELProgramDAG1, []byte{1, 2, 3}))
	expect(t, h, page(junk), http.StatusOK, "do not decode", "01 02 03")
	junkEdge := put(t, s, asl.Tagged(asl.TagTGK1EdgeV1, []byte("not an edge")))
	expect(t, h, page(junkEdge), http.StatusOK, "do not decode")

	// No RawURL: no download links.
	plain := webui.New(s, webui.Options{})
	body = expect(t, plain, "/a/"+text.String(), http.StatusOK, "héllo wörld, and more")
	if strings.Contains(body, "download") || strings.Contains(body, "Download") {
		t.Error("download link without RawURL")
	}
}

// TestPebbleStore runs the pages against the embedded store: a chunked
// artifact is previewed from its start, and damage is a 500.
func TestPebbleStore(t *testing.T) {
	t.Parallel()
	s, err := pebblestore.Create(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f := newFixture(t, s)
	h := newHandler(s)
	expect(t, h, page(f.greetOK.ResultRef), http.StatusOK, "Dear amduat", `class="node st-ok`)

	big := bytes.Repeat([]byte("0123456789abcdef\n"), 64<<10) // 1.1 MiB: several chunks
	ref := put(t, s, asl.Untagged(big))
	expect(t, h, page(ref), http.StatusOK, "the first 4.0 KiB (4096 bytes) of 1.1 MiB (1114112 bytes)", "0123456789abcdef")

	s.Corrupt(ref, []byte("other"))
	expect(t, h, page(ref), http.StatusInternalServerError, "ERR_INTEGRITY")
	s.Corrupt(f.greet, []byte("other"))
	expect(t, h, page(f.greet), http.StatusInternalServerError, "ERR_INTEGRITY")
	expect(t, h, page(f.greetOK.ResultRef), http.StatusOK, "The program cannot be shown: it is damaged")
}

// noIndex hides the store's index: provenance is unavailable, traces are
// found by scanning.
type noIndex struct{ asl.Store }

func TestNoIndex(t *testing.T) {
	t.Parallel()
	f := newFixture(t, memstore.New())
	h := newHandler(noIndex{f.s})
	body := expect(t, h, page(f.brokenRun.ResultRef), http.StatusOK, "This store keeps no provenance index.")
	if got, want := statuses(body), map[string]int{"st-ok": 2, "st-failed": 1, "st-skipped": 1}; !maps.Equal(got, want) {
		t.Errorf("DAG nodes by status: %v, want %v (the trace found by scanning)", got, want)
	}
	if _, _, err := tgk.EdgesTo(context.Background(), noIndex{f.s}, f.a); err == nil {
		t.Fatal("noIndex still has an index")
	}
}

// TestOddPrograms draws programs a store may hold although they cannot
// run: a cycle, a missing node, a program too large to draw, and one using
// the global params.
func TestOddPrograms(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	h := newHandler(s)
	store := func(p pel.Program) asl.Reference {
		t.Helper()
		a, err := pel.ProgramArtifact(p)
		if err != nil {
			t.Fatal(err)
		}
		return put(t, s, a)
	}
	concat := pel.OperationID{Name: "pel.bytes.concat", Version: 1}

	cyclic := store(pel.Program{
		Nodes: []pel.Node{
			{ID: 1, Op: concat, Inputs: []pel.DagInput{pel.FromNode(2, 0)}},
			{ID: 2, Op: concat, Inputs: []pel.DagInput{pel.FromNode(1, 0)}},
			{ID: 3, Op: concat, Inputs: []pel.DagInput{pel.FromNode(9, 0), pel.External(0)}},
		},
		Roots: []pel.RootRef{{NodeID: 3}, {NodeID: 8}},
	})
	body := expect(t, h, page(cyclic), http.StatusOK, "not valid", "missing node 8", "missing node 9", `class="edge back"`)
	if n := strings.Count(body, `class="node cycle"`); n != 2 {
		t.Errorf("%d nodes marked as in a cycle, want 2", n)
	}
	if again := expect(t, h, page(cyclic), http.StatusOK); again != body {
		t.Error("the same program rendered twice differs")
	}

	// A chain too long to draw: a table of the first MaxTableNodes nodes.
	var chain pel.Program
	chain.Nodes = append(chain.Nodes, pel.Node{ID: 1, Op: pel.OperationID{Name: "pel.bytes.const", Version: 1}, Params: []byte{0, 0, 0, 0, 0}})
	for i := 2; i <= webui.MaxDAGVertices+10; i++ {
		chain.Nodes = append(chain.Nodes, pel.Node{ID: pel.NodeID(i), Op: concat, Inputs: []pel.DagInput{pel.FromNode(pel.NodeID(i-1), 0)}})
	}
	chain.Roots = []pel.RootRef{{NodeID: pel.NodeID(len(chain.Nodes))}}
	body = expect(t, h, page(store(chain)), http.StatusOK, "too many nodes to draw", "more nodes are not listed")
	if strings.Contains(body, "<svg") {
		t.Error("a program above MaxDAGVertices is drawn")
	}
	if n := strings.Count(body, `<tr id="node-`); n != webui.MaxTableNodes {
		t.Errorf("%d node rows, want %d", n, webui.MaxTableNodes)
	}

	// pel.bytes.params reads the global params: a params box feeds it.
	params := store(pel.Program{
		Nodes: []pel.Node{{ID: 1, Op: pel.OperationID{Name: "pel.bytes.params", Version: 1}}},
		Roots: []pel.RootRef{{NodeID: 1}},
	})
	gp := put(t, s, asl.Untagged([]byte("global")))
	r := run(t, s, surf.Request{ProgramRef: params, ParamsRef: gp, HasParams: true})
	expect(t, h, page(params), http.StatusOK, `<g class="term params">`)
	expect(t, h, page(r.ResultRef), http.StatusOK, `<g class="term params"><a href="`+page(gp)+`">`, "global")
}

// TestManyRuns: an input used by more runs than a page lists.
func TestManyRuns(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	h := newHandler(s)
	in := put(t, s, asl.Untagged([]byte("shared input")))
	prog := put(t, s, mustSeed(t, pel.SeedConcat))
	n := webui.MaxProvRuns + 5
	for i := 0; i < n; i++ {
		other := put(t, s, asl.Untagged([]byte(fmt.Sprintf("other %d", i))))
		run(t, s, surf.Request{ProgramRef: prog, InputRefs: []asl.Reference{in, other}})
	}
	body := expect(t, h, page(in), http.StatusOK, "5 more runs are not listed.")
	if got := strings.Count(body, "used by run"); got != webui.MaxProvRuns {
		t.Errorf("%d runs listed, want %d", got, webui.MaxProvRuns)
	}
}
