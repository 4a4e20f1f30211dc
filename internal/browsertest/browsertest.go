// Package browsertest starts Debian's headless Chromium for the browser
// tests of the web view (server/webui, server), driven by chromedp. A test
// run without Chromium skips those tests with one line saying how to
// install it.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// ChromiumPath finds Debian's chromium: /usr/bin/chromium, else chromium
// on PATH.
func ChromiumPath() (string, bool) {
	const debian = "/usr/bin/chromium"
	if _, err := os.Stat(debian); err == nil {
		return debian, true
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p, true
	}
	return "", false
}

// Start returns a browser context (one tab of a fresh headless Chromium
// with an empty profile and no background networking), ended when the test
// ends; it skips the test when Chromium is not installed. Every step run in
// the context is bounded by timeout.
func Start(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	exe, ok := ChromiumPath()
	if !ok {
		t.Skip("chromium not installed: apt-get install -y chromium; browser test skipped")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1360, 1000),
	)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(bcancel)
	return bctx
}
