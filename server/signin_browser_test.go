package server

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/amduat/amduat/internal/browsertest"
)

// TestSignInBrowser signs in through the form in headless Chromium, opens
// the pinned tree from the home page, walks into a directory by name, and
// signs out (SPECS.md §18.8).
func TestSignInBrowser(t *testing.T) {
	t.Parallel()
	bctx := browsertest.Shared(t, 90*time.Second)
	f := newSigninFixture(t)
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
	do("open /ui/ (sent to sign in)", chromedp.Navigate(f.ts+"/ui/"), chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)))
	do("sign in with a wrong token",
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), "amduat_wrong"),
		chromedp.Submit(chromedp.CSS(`input[name="token"]`)),
		chromedp.WaitVisible(chromedp.CSS(`p.notice`)))
	if msg := text(`p.notice`); !strings.Contains(msg, "not recognised") {
		t.Fatalf("after a wrong token: %q", msg)
	}
	do("sign in",
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), f.reader),
		chromedp.Submit(chromedp.CSS(`input[name="token"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#pins table`)))
	if who, pins := text(`section.session`), text(`#pins table`); !strings.Contains(who, "alice") || !strings.Contains(pins, "backup/home") {
		t.Fatalf("home page after signing in: %q / %q", who, pins)
	}
	// The cookie is HttpOnly: the page's script cannot read it.
	if c, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.cookie`)); err != nil || strings.Contains(c, "amduat_session") {
		t.Fatalf("document.cookie = %q, %v: the session cookie is visible to scripts", c, err)
	}
	do("browse the pinned tree", chromedp.Click(chromedp.CSS(`#pins a[href*="/ui/t/"]`)), chromedp.WaitVisible(chromedp.CSS(`table.tree`)))
	if rows := text(`table.tree tbody`); !strings.Contains(rows, "notes <b>.txt") || !strings.Contains(rows, "bin/") {
		t.Fatalf("tree page rows %q", rows)
	}
	do("open bin/", chromedp.Click(chromedp.CSS(`table.tree a[href$="/bin/"]`)), chromedp.WaitVisible(chromedp.CSS(`h1.crumbs`)))
	if crumbs, rows := text(`h1.crumbs`), text(`table.tree tbody`); !strings.HasSuffix(strings.TrimSpace(crumbs), "bin") || !strings.Contains(rows, "run.sh") {
		t.Fatalf("bin/ page: crumbs %q rows %q", crumbs, rows)
	}
	do("sign out", chromedp.Navigate(f.ts+"/ui/"), chromedp.WaitVisible(chromedp.CSS(`section.session button`)),
		chromedp.Click(chromedp.CSS(`section.session button`)), chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)))
}
