package server

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/server/webui"
)

// Browser sessions (SPECS.md §18.8, "Signing in"). A browser sends no
// bearer token by itself, so behind a token file the web view offers a
// sign-in form: the token typed there is checked as a bearer token would be
// (it must carry the read scope), and the browser gets a session cookie
//
//	amduat_session = base64url(name) "." expiry (Unix seconds, decimal) "." base64url(mac)
//	mac = HMAC-SHA-256(key, name ‖ 0x00 ‖ expiry ‖ 0x00 ‖ SHA-256(token))
//
// HttpOnly, SameSite=Strict, Path=/, Secure over TLS. key is random per
// server process, so a restart signs everyone out; the token's hash in the
// MAC means revoking (or replacing) the token ends its sessions at once.
// A session stands in for the bearer token on GET and HEAD only; the forms
// that change state (sign-in, sign-out) carry a CSRF token bound to a
// cookie (double submit), checked in constant time.
type sessions struct {
	key  [32]byte
	auth *Auth
	ttl  time.Duration
}

const (
	sessionCookie = "amduat_session"
	csrfCookie    = "amduat_csrf"
	// sessionTTL is how long a sign-in lasts.
	sessionTTL = 12 * time.Hour
	// maxLoginForm bounds the body of a sign-in or sign-out form.
	maxLoginForm = 4 << 10
)

func newSessions(auth *Auth) *sessions {
	ss := &sessions{auth: auth, ttl: sessionTTL}
	if _, err := rand.Read(ss.key[:]); err != nil {
		panic("server: no randomness for the session key: " + err.Error())
	}
	return ss
}

func (ss *sessions) mac(parts ...string) []byte {
	m := hmac.New(sha256.New, ss.key[:])
	for i, p := range parts {
		if i > 0 {
			m.Write([]byte{0})
		}
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

var b64 = base64.RawURLEncoding

// issue returns the cookie value of a session of the token entry e.
func (ss *sessions) issue(e authEntry, now time.Time) string {
	exp := strconv.FormatInt(now.Add(ss.ttl).Unix(), 10)
	return b64.EncodeToString([]byte(e.name)) + "." + exp + "." + b64.EncodeToString(ss.mac(e.name, exp, string(e.sum[:])))
}

// check returns the token entry a session cookie value stands for, if the
// value is well formed, unexpired, signed by this process and its token
// still exists unchanged.
func (ss *sessions) check(v string, now time.Time) (authEntry, bool) {
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return authEntry{}, false
	}
	name, err := b64.DecodeString(parts[0])
	if err != nil {
		return authEntry{}, false
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || now.Unix() >= exp {
		return authEntry{}, false
	}
	got, err := b64.DecodeString(parts[2])
	if err != nil {
		return authEntry{}, false
	}
	e, ok := ss.auth.byName(string(name))
	if !ok {
		return authEntry{}, false
	}
	return e, hmac.Equal(got, ss.mac(e.name, parts[1], string(e.sum[:])))
}

// csrf is the form token bound to a cookie value and a purpose.
func (ss *sessions) csrf(purpose, bound string) string {
	return b64.EncodeToString(ss.mac("csrf", purpose, bound))
}

func (ss *sessions) csrfOK(purpose, bound, got string) bool {
	want := ss.csrf(purpose, bound)
	return bound != "" && subtle.ConstantTimeCompare([]byte(want), []byte(got)) == 1
}

// fromRequest returns the session a request's cookie carries.
func (ss *sessions) fromRequest(r *http.Request) (authEntry, string, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return authEntry{}, "", false
	}
	e, ok := ss.check(c.Value, time.Now())
	return e, c.Value, ok
}

// webSession is webui.Options.Session: the signed-in name and the sign-out
// form's CSRF token.
func (ss *sessions) webSession(r *http.Request) (string, string) {
	e, v, ok := ss.fromRequest(r)
	if !ok {
		return "", ""
	}
	return e.name, ss.csrf("logout", v)
}

func cookie(r *http.Request, name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil}
}

// loginPage serves GET /ui/login: the form, with a fresh CSRF cookie.
func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) error {
	s.renderLogin(w, r, http.StatusOK, "")
	return nil
}

func (s *Server) renderLogin(w http.ResponseWriter, r *http.Request, status int, msg string) {
	bind := ""
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) >= 16 {
		bind = c.Value
	} else {
		var nonce [18]byte
		rand.Read(nonce[:])
		bind = b64.EncodeToString(nonce[:])
		http.SetCookie(w, cookie(r, csrfCookie, bind, int(time.Hour/time.Second)))
	}
	webui.RenderLogin(w, "/ui/", status, s.sessions.csrf("login", bind), msg)
}

// login serves POST /ui/login: checks the CSRF token and the bearer token
// typed in the form, then sets the session cookie and goes home.
func (s *Server) login(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginForm)
	if err := r.ParseForm(); err != nil {
		s.renderLogin(w, r, http.StatusBadRequest, "The form could not be read.")
		return nil
	}
	c, err := r.Cookie(csrfCookie)
	if err != nil || !s.sessions.csrfOK("login", c.Value, r.PostForm.Get("csrf")) {
		s.renderLogin(w, r, http.StatusForbidden, "The form expired or came from another site; sign in again.")
		return nil
	}
	e, err := s.auth.checkToken(strings.TrimSpace(r.PostForm.Get("token")))
	if err != nil {
		s.renderLogin(w, r, http.StatusUnauthorized, "That token is not recognised (revoked, mistyped, or for another server).")
		return nil
	}
	if !e.scopes.has(scopeRead) {
		s.renderLogin(w, r, http.StatusForbidden, "That token lacks the read scope the web view needs.")
		return nil
	}
	http.SetCookie(w, cookie(r, sessionCookie, s.sessions.issue(e, time.Now()), int(s.sessions.ttl/time.Second)))
	http.SetCookie(w, cookie(r, csrfCookie, "", -1))
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
	return nil
}

// logout serves POST /ui/logout: with the session's CSRF token, the
// session cookie is cleared.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginForm)
	_, v, ok := s.sessions.fromRequest(r)
	if err := r.ParseForm(); err != nil || !ok || !s.sessions.csrfOK("logout", v, r.PostForm.Get("csrf")) {
		return &httpError{http.StatusForbidden, httpstore.CodeForbidden, "sign-out needs the form of a signed-in page"}
	}
	http.SetCookie(w, cookie(r, sessionCookie, "", -1))
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
	return nil
}
