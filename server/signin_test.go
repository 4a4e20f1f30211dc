package server

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/tree"
)

// signinFixture is a server behind a token file, holding a pinned tree of
// two files.
type signinFixture struct {
	ts                   string
	reader, writer, file string
	treeRef, fileRef     asl.Reference
	tokens               string
}

func newSigninFixture(t *testing.T) *signinFixture {
	t.Helper()
	f := &signinFixture{tokens: filepath.Join(t.TempDir(), "tokens.json")}
	var err error
	if f.reader, err = AddToken(f.tokens, "alice", []string{"read"}); err != nil {
		t.Fatal(err)
	}
	if f.writer, err = AddToken(f.tokens, "bot", []string{"write"}); err != nil {
		t.Fatal(err)
	}
	auth, err := LoadAuth(f.tokens)
	if err != nil {
		t.Fatal(err)
	}
	_, ts, st := newTestServer(t, Config{Auth: auth})
	ctx := context.Background()
	refs, err := st.PutBatch(ctx, asl.HashSHA256, []asl.Artifact{asl.Untagged([]byte("hello, browser\n")), asl.Untagged([]byte("#!/bin/sh\n"))})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := tree.Artifact([]tree.Entry{{Name: "run.sh", Kind: tree.File, Executable: true, Size: 10, Ref: refs[1]}})
	if err != nil {
		t.Fatal(err)
	}
	subRef, err := asl.PutArtifact(ctx, st, asl.HashSHA256, sub)
	if err != nil {
		t.Fatal(err)
	}
	top, err := tree.Artifact([]tree.Entry{
		{Name: "bin", Kind: tree.Dir, Size: uint64(len(sub.Bytes)), Ref: subRef},
		{Name: "notes <b>.txt", Kind: tree.File, Size: 15, Ref: refs[0]},
	})
	if err != nil {
		t.Fatal(err)
	}
	if f.treeRef, err = asl.PutArtifact(ctx, st, asl.HashSHA256, top); err != nil {
		t.Fatal(err)
	}
	if err := st.Pin(ctx, "backup/home", f.treeRef, asl.PinOptions{}); err != nil {
		t.Fatal(err)
	}
	f.ts, f.fileRef = ts.URL, refs[0]
	return f
}

// browser is an HTTP client that keeps cookies and does not follow
// redirects, as a test of what each answer says.
func browser(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, c *http.Client, u string) (int, http.Header, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header, string(b)
}

func post(t *testing.T, c *http.Client, u string, form url.Values) (int, http.Header, string) {
	t.Helper()
	resp, err := c.PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header, string(b)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// TestSignIn: behind a token file a browser signs in through the form and
// gets an HttpOnly, SameSite=Strict session cookie that reads (pages and
// downloads) but never writes; the forms are CSRF-protected; revoking the
// token or signing out ends the session (SPECS.md §18.8).
func TestSignIn(t *testing.T) {
	t.Parallel()
	f := newSigninFixture(t)
	c := browser(t)

	if st, h, _ := get(t, c, f.ts+"/ui/"); st != http.StatusSeeOther || h.Get("Location") != "/ui/login" {
		t.Fatalf("GET /ui/ without a session: %d to %q, want 303 to /ui/login", st, h.Get("Location"))
	}
	st, h, body := get(t, c, f.ts+"/ui/login")
	m := csrfField.FindStringSubmatch(body)
	if st != http.StatusOK || m == nil {
		t.Fatalf("GET /ui/login: %d, csrf field %v", st, m)
	}
	if sc := h.Get("Set-Cookie"); !strings.Contains(sc, "amduat_csrf=") || !strings.Contains(sc, "HttpOnly") || !strings.Contains(sc, "SameSite=Strict") {
		t.Fatalf("login page cookie %q", sc)
	}
	csrf := m[1]

	for _, tc := range []struct {
		name   string
		form   url.Values
		status int
		say    string
	}{
		{"no csrf", url.Values{"token": {f.reader}}, http.StatusForbidden, "another site"},
		{"wrong csrf", url.Values{"token": {f.reader}, "csrf": {csrf + "x"}}, http.StatusForbidden, "another site"},
		{"unknown token", url.Values{"token": {"amduat_nope"}, "csrf": {csrf}}, http.StatusUnauthorized, "not recognised"},
		{"token without read", url.Values{"token": {f.writer}, "csrf": {csrf}}, http.StatusForbidden, "read scope"},
	} {
		if st, h, body := post(t, c, f.ts+"/ui/login", tc.form); st != tc.status || !strings.Contains(body, tc.say) || strings.Contains(h.Get("Set-Cookie"), "amduat_session=") {
			t.Fatalf("%s: %d (cookie %q), want %d saying %q", tc.name, st, h.Get("Set-Cookie"), tc.status, tc.say)
		}
	}
	// Another browser's CSRF token does not fit this browser's cookie.
	other := browser(t)
	if st, _, _ := post(t, other, f.ts+"/ui/login", url.Values{"token": {f.reader}, "csrf": {csrf}}); st != http.StatusForbidden {
		t.Fatalf("login with another browser's CSRF token: %d, want 403", st)
	}

	st, h, _ = post(t, c, f.ts+"/ui/login", url.Values{"token": {f.reader}, "csrf": {csrf}})
	sc := h.Get("Set-Cookie")
	if st != http.StatusSeeOther || h.Get("Location") != "/ui/" || !strings.Contains(sc, "amduat_session=") ||
		!strings.Contains(sc, "HttpOnly") || !strings.Contains(sc, "SameSite=Strict") || strings.Contains(sc, f.reader) {
		t.Fatalf("sign in: %d to %q, cookie %q", st, h.Get("Location"), sc)
	}

	// The home page lists the pin and who is signed in; the pinned tree
	// is browsable by names, escaped; its files download.
	st, _, body = get(t, c, f.ts+"/ui/")
	if st != http.StatusOK || !strings.Contains(body, "signed in as <strong>alice</strong>") || !strings.Contains(body, "backup/home") ||
		!strings.Contains(body, `href="/ui/t/`+f.treeRef.String()+`/"`) {
		t.Fatalf("home page: %d\n%s", st, body)
	}
	st, _, body = get(t, c, f.ts+"/ui/t/"+f.treeRef.String()+"/")
	if st != http.StatusOK || !strings.Contains(body, "notes &lt;b&gt;.txt") || !strings.Contains(body, `href="/ui/t/`+f.treeRef.String()+`/bin/"`) {
		t.Fatalf("tree page: %d\n%s", st, body)
	}
	if st, _, body = get(t, c, f.ts+"/ui/t/"+f.treeRef.String()+"/bin/"); st != http.StatusOK || !strings.Contains(body, "run.sh") || !strings.Contains(body, "executable") {
		t.Fatalf("tree page bin/: %d\n%s", st, body)
	}
	if st, _, _ = get(t, c, f.ts+"/ui/t/"+f.treeRef.String()+"/nope/"); st != http.StatusNotFound {
		t.Fatalf("tree page of a missing path: %d, want 404", st)
	}
	if st, h, _ = get(t, c, f.ts+"/ui/?ref=backup/home"); st != http.StatusSeeOther || h.Get("Location") != "/ui/t/"+f.treeRef.String()+"/" {
		t.Fatalf("search by pin name: %d to %q", st, h.Get("Location"))
	}
	if st, _, body = get(t, c, f.ts+"/v1/artifacts/"+f.fileRef.String()); st != http.StatusOK || body != "hello, browser\n" {
		t.Fatalf("download with the session: %d %q", st, body)
	}
	// The session never writes.
	resp, err := c.Post(f.ts+"/v1/artifacts", "application/octet-stream", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("POST /v1/artifacts with only a session cookie: %d, want 401", resp.StatusCode)
	}

	// Sign out needs the page's CSRF token.
	_, _, body = get(t, c, f.ts+"/ui/")
	m = csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("home page has no sign-out form")
	}
	if st, _, _ := post(t, c, f.ts+"/ui/logout", url.Values{"csrf": {"forged"}}); st != http.StatusForbidden {
		t.Fatalf("logout with a forged CSRF token: %d, want 403", st)
	}
	if st, _, _ := post(t, c, f.ts+"/ui/logout", url.Values{"csrf": {m[1]}}); st != http.StatusSeeOther {
		t.Fatalf("logout: %d, want 303", st)
	}
	if st, _, _ := get(t, c, f.ts+"/ui/"); st != http.StatusSeeOther {
		t.Fatalf("GET /ui/ after signing out: %d, want 303", st)
	}

	// Revoking the token ends a session (the token file is re-read at most
	// once a second: wait for that, not for a fixed time).
	c2 := browser(t)
	_, _, body = get(t, c2, f.ts+"/ui/login")
	post(t, c2, f.ts+"/ui/login", url.Values{"token": {f.reader}, "csrf": {csrfField.FindStringSubmatch(body)[1]}})
	if st, _, _ := get(t, c2, f.ts+"/ui/"); st != http.StatusOK {
		t.Fatalf("second session: %d", st)
	}
	if err := RevokeToken(f.tokens, "alice"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		st, _, _ := get(t, c2, f.ts+"/ui/")
		if st == http.StatusSeeOther {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a revoked token's session still reads after a minute (%d)", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
