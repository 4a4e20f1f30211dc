package webui_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/internal/browsertest"
	"github.com/amduat/amduat/server/webui"
)

// TestBrowser loads the pages of real runs (an OK run and a run that fails
// at runtime, stored in the embedded store) in headless Chromium, reads the
// DAG's node boxes and their statuses from the DOM, follows a link, and
// saves screenshots to t.TempDir() and, when AMDUAT_SCREENSHOT_DIR is set,
// there too.
func TestBrowser(t *testing.T) {
	t.Parallel()
	start := time.Now()
	s, err := pebblestore.Create(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f := newFixture(t, s)

	mux := http.NewServeMux()
	mux.Handle("/ui/", webui.New(s, webui.Options{Prefix: "/ui/", RawURL: rawURL}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	bctx := browsertest.Start(t, 90*time.Second)

	shotDirs := []string{t.TempDir()}
	if d := os.Getenv("AMDUAT_SCREENSHOT_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		shotDirs = append(shotDirs, d)
	}
	shoot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		for _, d := range shotDirs {
			p := filepath.Join(d, name)
			if err := os.WriteFile(p, png, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("screenshot %s", p)
		}
	}
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	open := func(path string) {
		t.Helper()
		do("open "+path, chromedp.Navigate(srv.URL+path), chromedp.WaitVisible(chromedp.CSS(`svg.dag`)))
	}

	// expectNodes reads the DAG's node boxes from the DOM, in document
	// order: each one's operation (its text.op) and its status (its st-*
	// class, "none" without one).
	expectNodes := func(what string, want ...string) {
		t.Helper()
		classes, err := chromedp.Run(bctx, chromedp.AttributesAll(chromedp.CSSAll(`svg.dag g.node`)))
		if err != nil {
			t.Fatalf("%s: DAG nodes: %v", what, err)
		}
		ops, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](
			`Array.from(document.querySelectorAll("svg.dag g.node text.op"), e => e.textContent)`))
		if err != nil {
			t.Fatalf("%s: DAG operations: %v", what, err)
		}
		if len(ops) != len(classes) {
			t.Fatalf("%s: %d node boxes, %d operation names", what, len(classes), len(ops))
		}
		var got []string
		for i, attrs := range classes {
			status := "none"
			for _, c := range strings.Fields(attrs["class"]) {
				if strings.HasPrefix(c, "st-") {
					status = c
				}
			}
			got = append(got, ops[i]+" "+status)
		}
		if strings.Join(got, "; ") != strings.Join(want, "; ") {
			t.Fatalf("%s: DAG nodes %q, want %q", what, got, want)
		}
	}

	// The OK run: every node green, the text output previewed.
	open(page(f.greetOK.ResultRef))
	if st, out := text(`.status-line .badge`), text(`.output pre.text`); st != "OK" || strings.TrimSpace(out) != "Dear amduat" {
		t.Fatalf("OK run page: status %q, output preview %q", st, out)
	}
	expectNodes("OK run", "pel.bytes.const@1 st-ok", "pel.bytes.concat@1 st-ok", "pel.bytes.hash.asl1@1 st-ok")
	shoot("result-ok.png")

	// The failing run: green, green, red, grey.
	open(page(f.brokenRun.ResultRef))
	if st := text(`.status-line .badge`); st != "RUNTIME_FAILED" {
		t.Fatalf("failing run page: status %q", st)
	}
	expectNodes("failing run", "pel.bytes.const@1 st-ok", "pel.bytes.concat@1 st-ok", "pel.bytes.slice@1 st-failed", "pel.bytes.hash.asl1@1 st-skipped")
	// The style sheet applies under the page's Content-Security-Policy:
	// each status has its own fill.
	fills, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](
		`["st-ok", "st-failed", "st-skipped"].map(c => getComputedStyle(document.querySelector("svg.dag g.node." + c + " rect")).fill)`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"rgb(220, 245, 230)", "rgb(253, 226, 225)", "rgb(236, 238, 242)"}; strings.Join(fills, "; ") != strings.Join(want, "; ") {
		t.Fatalf("node fills %q, want %q (is the style sheet applied?)", fills, want)
	}
	shoot("result-failed.png")

	// Follow the result's link to its program: the same DAG, uncoloured.
	do("follow the program link",
		chromedp.Click(chromedp.CSS(`dl.facts a.ref[href$="`+f.broken.String()+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`svg.dag`)),
	)
	loc, err := chromedp.Run(bctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if loc != srv.URL+page(f.broken) || !strings.EqualFold(text(`p.kind`), "program") {
		t.Fatalf("after following the program link: at %q, kind %q", loc, text(`p.kind`))
	}
	expectNodes("program", "pel.bytes.const@1 none", "pel.bytes.concat@1 none", "pel.bytes.slice@1 none", "pel.bytes.hash.asl1@1 none")
	shoot("program.png")

	// A DAG node links to its row in the node table.
	do("click node 3", chromedp.Click(chromedp.CSS(`svg.dag g.node[data-node="3"] rect`)))
	loc, err = chromedp.Run(bctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(loc, "#node-3") {
		t.Fatalf("clicking node 3 went to %q", loc)
	}
	t.Logf("browser test took %s", time.Since(start).Round(time.Millisecond))
}
