package server

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/internal/browsertest"
	"github.com/amduat/amduat/plan"
)

// TestPlanBrowser drives an execution page in headless Chromium (SPECS.md
// §18.7): signed in with a token holding the approve scope, the page shows
// send waiting for approval; a POST from the page without the CSRF token
// is refused with 403 and the JSON error body; clicking Approve records
// the approval by the token's name and calls nothing; after a resume (what
// a server's worker does) the page shows send succeeded with the receipt
// of its one call, whose link opens the receipt's artifact page.
func TestPlanBrowser(t *testing.T) {
	t.Parallel()
	bctx := browsertest.Shared(t, 90*time.Second)
	f := newPlanUIFixture(t, true)
	execPath := "/ui/plans/" + f.exec.String()
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
	// shoot saves a screenshot to AMDUAT_SCREENSHOT_DIR when it is set.
	shoot := func(name string) {
		t.Helper()
		dir := os.Getenv("AMDUAT_SCREENSHOT_DIR")
		if dir == "" {
			return
		}
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// boxes reads the graph's step boxes: "ID STATE-CLASS" in document order.
	boxes := func() string {
		t.Helper()
		got, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](
			`Array.from(document.querySelectorAll("svg.dag g.step"), g => g.dataset.node + " " + Array.from(g.classList).filter(c => c.startsWith("st-")).join(","))`))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(got, "; ")
	}

	do("open the execution (sent to sign in)", chromedp.Navigate(f.ts.URL+execPath), chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)))
	do("sign in",
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), f.alice),
		chromedp.Submit(chromedp.CSS(`input[name="token"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#pins`)))
	do("open the plans page", chromedp.Click(chromedp.CSS(`header a.nav`)), chromedp.WaitVisible(chromedp.CSS(`table.plans`)))
	do("open the execution", chromedp.Click(chromedp.CSS(`table.plans a.exec`)), chromedp.WaitVisible(chromedp.CSS(`form.decide.approve`)))
	if st, got := text(`#exec-status`), boxes(); st != "waiting" || got != "doc st-ok; send st-wait" {
		t.Fatalf("before approving: status %q, graph %q", st, got)
	}
	shoot("plan-waiting.png")
	if s := text(`tr[data-step="send"] .state`); s != "waiting_approval" {
		t.Fatalf("send's state %q", s)
	}
	fill, err := chromedp.Run(bctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector("svg.dag g.step.st-wait rect")).fill`))
	if err != nil || fill != "rgb(253, 240, 213)" {
		t.Fatalf("a waiting step's fill %q, %v (is the style sheet applied?)", fill, err)
	}

	// The same POST the form makes, from the page, without the token.
	raw, err := chromedp.Run(bctx, chromedp.Evaluate[string](`fetch(document.querySelector("form.decide.approve").action, {method: "POST",
		headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "step=send&decision=approve", redirect: "manual"})
		.then(async r => JSON.stringify({status: r.status, type: r.headers.get("Content-Type"), body: await r.text()}))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	var refused struct {
		Status int    `json:"status"`
		Type   string `json:"type"`
		Body   string `json:"body"`
	}
	var eb httpstore.ErrorBody
	if err := json.Unmarshal([]byte(raw), &refused); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(refused.Body), &eb); err != nil || refused.Status != 403 || !strings.HasPrefix(refused.Type, "application/json") || eb.Code != "forbidden" {
		t.Fatalf("a POST without the CSRF token: %s", raw)
	}
	if s := f.stepState(t, "send"); s.State != plan.StateWaitingApproval {
		t.Fatalf("after the refused POST send is %s", s.State)
	}

	do("approve", chromedp.Click(chromedp.CSS(`form.decide.approve button`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-step="send"] .badge.st-run`)))
	if s := text(`tr[data-step="send"]`); !strings.Contains(s, "decided by alice") || !strings.Contains(s, "approval by alice") {
		t.Fatalf("send after approving: %q", s)
	}
	if f.svc.total() != 0 {
		t.Fatal("approving called the service")
	}

	// Resume, as serve's workers do, then reload.
	x, err := f.runner.Run(context.Background(), f.exec)
	if err != nil {
		t.Fatal(err)
	}
	if x.Status != plan.ExecCompleted || f.svc.total() != 1 {
		t.Fatalf("after the resume: %s, %d calls", x.Status, f.svc.total())
	}
	do("reload", chromedp.Navigate(f.ts.URL+execPath), chromedp.WaitVisible(chromedp.CSS(`tr[data-step="send"] .badge.st-ok`)))
	if st, got := text(`#exec-status`), boxes(); st != "completed" || got != "doc st-ok; send st-ok" {
		t.Fatalf("after the resume: status %q, graph %q", st, got)
	}
	shoot("plan-completed.png")
	if s := text(`tr[data-step="send"] td.receipts`); !strings.Contains(s, "attempt 1 succeeded") {
		t.Fatalf("send's receipts: %q", s)
	}
	if n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("form.decide").length`)); err != nil || n != 0 {
		t.Fatalf("%d decision forms on a completed execution, %v", n, err)
	}
	s, _ := x.Step("send")
	receipt := s.Receipts[len(s.Receipts)-1]
	do("open the receipt", chromedp.Click(chromedp.CSS(`tr[data-step="send"] td.receipts a[href$="`+receipt.String()+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`h1`)))
	loc, err := chromedp.Run(bctx, chromedp.Location())
	if err != nil || loc != f.ts.URL+"/ui/a/"+receipt.String() {
		t.Fatalf("after clicking the receipt: at %q, %v", loc, err)
	}
}
