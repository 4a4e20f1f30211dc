package server

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/plan"
)

// The web view's decisions on plans (SPECS.md §18.7, "The pages"; §24.8):
// an execution page's approve and reject forms post to
//
//	POST /ui/plans/{exec}/decide   form: csrf, step, decision (approve|reject), reason
//
// and this adapter records the decision with plan.Runner.Approve or Reject,
// the caller's token name as the actor, then answers 303 to the page. A
// browser is trusted only with the form's CSRF token, bound to its session
// cookie (or, without a token file, to the amduat_csrf cookie) and to the
// purpose "plan"; a request with an Authorization header needs none (a
// browser never adds one by itself). The caller needs the approve scope.

// codeNotWaiting is the error code of a decision on a step that does not
// wait for approval (409).
const codeNotWaiting = "not_waiting"

// mayApprove reports whether a caller's scopes allow approving or
// rejecting a plan's gated step.
func mayApprove(sc scopeSet) bool { return sc.has(scopeApprove) }

// allScopes is what every caller holds without a token file.
const allScopes = ^scopeSet(0)

// planForm is webui.Options.PlanForm: the token of the decision forms of
// the page r asks for. Signed in, it is bound to the session; a caller
// with a bearer token (a script) gets no forms. Without a token file it is
// bound to the amduat_csrf cookie, set here when the browser has none.
func (s *Server) planForm(w http.ResponseWriter, r *http.Request) string {
	if s.sessions != nil {
		_, v, ok := s.sessions.fromRequest(r)
		if !ok {
			return ""
		}
		return s.forms.csrf("plan", v)
	}
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) >= 16 {
		return s.forms.csrf("plan", c.Value)
	}
	var nonce [18]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return ""
	}
	bind := b64.EncodeToString(nonce[:])
	http.SetCookie(w, cookie(r, csrfCookie, bind, int(sessionTTL/time.Second)))
	return s.forms.csrf("plan", bind)
}

// formCaller returns who posts a decision form, and their scopes: the
// bearer token when one is sent, else the browser whose CSRF token
// matches its session (or its amduat_csrf cookie without a token file).
func (s *Server) formCaller(r *http.Request) (string, scopeSet, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		if s.auth == nil {
			return anonymousActor, allScopes, nil
		}
		name, scopes, err := s.auth.Check(h)
		if err != nil {
			return "", 0, &httpError{http.StatusUnauthorized, httpstore.CodeUnauthorized, err.Error()}
		}
		return name, scopes, nil
	}
	got := r.PostForm.Get("csrf")
	if s.sessions != nil {
		e, v, ok := s.sessions.fromRequest(r)
		if !ok || !s.forms.csrfOK("plan", v, got) {
			return "", 0, &httpError{http.StatusForbidden, httpstore.CodeForbidden, "a decision needs the form of a signed-in execution page (missing or wrong CSRF token, or no session)"}
		}
		return e.name, e.scopes, nil
	}
	c, err := r.Cookie(csrfCookie)
	if err != nil || !s.forms.csrfOK("plan", c.Value, got) {
		return "", 0, &httpError{http.StatusForbidden, httpstore.CodeForbidden, "a decision needs the form of an execution page (missing or wrong CSRF token)"}
	}
	return anonymousActor, allScopes, nil
}

// planDecision serves POST /ui/plans/{exec}/decide.
func (s *Server) planDecision(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginForm)
	if err := r.ParseForm(); err != nil {
		return badRequest("decision form: %v", err)
	}
	actor, scopes, err := s.formCaller(r)
	if rec, ok := w.(*recorder); ok {
		rec.token = actor
	}
	if err != nil {
		return err
	}
	if !mayApprove(scopes) {
		return &httpError{http.StatusForbidden, httpstore.CodeForbidden,
			fmt.Sprintf("token %q lacks the %s scope approving or rejecting a step needs", actor, scopeApprove)}
	}
	id, err := asl.ParseReference(strings.ToLower(r.PathValue("exec")))
	if err != nil {
		return &httpError{http.StatusBadRequest, httpstore.CodeBadReference, fmt.Sprintf("execution %q: %v", r.PathValue("exec"), err)}
	}
	step := r.PostForm.Get("step")
	d := r.PostForm.Get("decision")
	if d != "approve" && d != "reject" {
		return badRequest("decision %q: want approve or reject", d)
	}
	x, err := s.plans.runner.Status(r.Context(), id)
	if err != nil {
		return fmt.Errorf("execution %s: %w", id, err)
	}
	if _, ok := x.Step(step); !ok {
		return &httpError{http.StatusNotFound, httpstore.CodeNotFound, fmt.Sprintf("execution %s has no step %q", id, step)}
	}
	switch d {
	case "approve":
		x, err = s.plans.runner.Approve(r.Context(), id, step, actor)
	case "reject":
		x, err = s.plans.runner.Reject(r.Context(), id, step, actor, r.PostForm.Get("reason"))
	}
	if errors.Is(err, plan.ErrNotWaiting) {
		return &httpError{http.StatusConflict, codeNotWaiting, oneLine(err.Error())}
	}
	if err != nil {
		return fmt.Errorf("execution %s step %q: %w", id, step, err)
	}
	s.plans.kick(x) // an approved step is run by the background workers
	http.Redirect(w, r, "/ui/plans/"+id.String(), http.StatusSeeOther)
	return nil
}
