// Package browsertest starts Debian's headless Chromium for the browser
// tests of the web view (server/webui, server), driven by chromedp. A test
// run without Chromium skips those tests with one line saying how to
// install it.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
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
	actx, acancel := chromedp.NewExecAllocator(ctx, allocatorOptions(exe, t.TempDir())...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(bcancel)
	return bctx
}

// windowWidth and windowHeight are the size of every browser window, and
// of every tab Shared opens.
const windowWidth, windowHeight = 1360, 1000

// allocatorOptions are the flags of every Chromium the tests start: headless,
// an empty profile in dir, no background networking.
func allocatorOptions(exe, dir string) []chromedp.ExecAllocatorOption {
	return append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(dir),
		chromedp.WindowSize(windowWidth, windowHeight),
	)
}

// shared is the one Chromium of a test binary whose tests call Shared.
var shared struct {
	mu      sync.Mutex
	browser context.Context // its first tab, the parent of every test's tab
	stop    func()          // ends Chromium and removes its profile
	err     error           // why it could not start, for every later caller
}

// logged are the tests using the shared Chromium, to whose logs its errors
// go. Its lock is not shared's: Chromium may report an error while it
// starts, under shared's lock.
var logged struct {
	mu    sync.Mutex
	tests map[*testing.T]bool
}

// Shared is Start for a package with several browser tests: they share one
// headless Chromium (a start costs about 2 CPU-seconds), started by the
// first call, each test in a tab of its own in a browser context of its own
// (cookies, storage and cache are not shared between tests), closed when
// the test ends. Every step run in the returned context is bounded by
// timeout, and so is Chromium's start. A package that calls Shared ends
// Chromium with Close from its TestMain, after m.Run; a process that exits
// without it takes Chromium with it (chromedp starts it with Pdeathsig),
// leaving its profile directory behind.
func Shared(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	exe, ok := ChromiumPath()
	if !ok {
		t.Skip("chromium not installed: apt-get install -y chromium; browser test skipped")
	}
	browser, err := sharedBrowser(exe, timeout)
	if err != nil {
		t.Fatal(err)
	}
	logged.mu.Lock()
	if logged.tests == nil {
		logged.tests = map[*testing.T]bool{}
	}
	logged.tests[t] = true
	logged.mu.Unlock()
	t.Cleanup(func() {
		logged.mu.Lock()
		delete(logged.tests, t)
		logged.mu.Unlock()
	})
	tab, closeTab := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(closeTab)
	ctx, cancel := context.WithTimeout(tab, timeout)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(windowWidth, windowHeight)); err != nil {
		t.Fatalf("browsertest: opening a tab: %v", err)
	}
	return ctx
}

// sharedBrowser starts the shared Chromium on the first call and returns
// its first tab's context.
func sharedBrowser(exe string, timeout time.Duration) (context.Context, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.browser != nil || shared.err != nil {
		return shared.browser, shared.err
	}
	dir, err := os.MkdirTemp("", "amduat-browsertest-*")
	if err != nil {
		shared.err = fmt.Errorf("browsertest: profile directory: %w", err)
		return nil, shared.err
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), allocatorOptions(exe, dir)...)
	bctx, bcancel := chromedp.NewContext(actx, chromedp.WithErrorf(sharedErrorf))
	stop := func() {
		bcancel()
		acancel()
		os.RemoveAll(dir)
	}
	// The first Run starts Chromium, whose life is bctx's: a deadline on
	// the context given to Run would end it, so the start is bounded here.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(bctx) }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err = <-started:
	case <-timer.C:
		err = fmt.Errorf("not started within %v", timeout)
	}
	if err != nil {
		stop()
		shared.err = fmt.Errorf("browsertest: starting %s: %w", exe, err)
		return nil, shared.err
	}
	shared.browser, shared.stop = bctx, stop
	return bctx, nil
}

// sharedErrorf reports the shared browser's errors in the log of every
// test using it at the time.
func sharedErrorf(format string, args ...any) {
	logged.mu.Lock()
	defer logged.mu.Unlock()
	for t := range logged.tests {
		t.Logf("chromium: "+format, args...)
	}
}

// Close ends the Chromium Shared started, if any.
func Close() {
	shared.mu.Lock()
	stop := shared.stop
	shared.browser, shared.stop, shared.err = nil, nil, nil
	shared.mu.Unlock()
	if stop != nil {
		stop()
	}
}
