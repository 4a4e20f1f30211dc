// Package webui is a read-only web view of an artifact store: artifacts by
// reference, PEL programs drawn as DAGs, results and traces with each node
// coloured by its status, provenance edges, previews of plain artifacts,
// and the executions of plans with each step coloured by its state.
//
// Pages are rendered on the server with html/template from embedded
// templates and one embedded CSS file; there is no client-side JavaScript
// and nothing is loaded from another origin. Program DAGs are laid out on the
// server as inline SVG (layers by longest path from the sources).
//
// Invariants:
//
//   - Output is deterministic: the same store content and the same request
//     give the same status, headers and HTML bytes (no clock, no randomness,
//     no map iteration order).
//   - Every piece of stored data reaches the page through html/template, so
//     it is escaped for its context; invalid UTF-8 and control characters in
//     names and messages are shown as escapes.
//   - Reading never loads more than it needs: PEL artifacts (programs,
//     traces, results, edges, scheme descriptors) are read whole only up to
//     MaxDecode bytes; anything else is previewed through Fetch and a read
//     bounded by the preview size. (surf.FindTrace, which locates a
//     result's trace, checks the trace it finds with its own bound.)
//   - A page is bounded whatever the store holds: at most MaxTableNodes
//     node rows, MaxDAGVertices boxes and bends in a drawing,
//     MaxOutputPreviews output previews and MaxProvRuns runs per direction
//     of provenance; what is left out is counted on the page.
//   - Bytes are shown only as the store verified them: a damaged artifact
//     (asl.ErrIntegrity) gives an HTTP 500 page saying ERR_INTEGRITY, never
//     its bytes. A damaged artifact that a page only refers to (a result's
//     program, output or trace) is reported in place on that page.
//   - The handler only reads the store; it never writes.
package webui

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/tree"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/plan"
)

// Options configure the handler.
type Options struct {
	// Prefix is where the handler is mounted, e.g. "/ui/"; links are built
	// under it. The handler strips it itself, so mount it as
	// mux.Handle(Prefix, h), not behind http.StripPrefix. A missing leading
	// or trailing slash is added; empty means "/".
	Prefix string
	// RawURL returns the download link of an artifact's bytes, e.g.
	// "/v1/artifacts/REF"; nil means no download links.
	RawURL func(asl.Reference) string
	// MaxPreview bounds the bytes of text previews (default 4 KiB).
	MaxPreview int
	// Ops holds the operations program pages check validity against and
	// render readable params of; nil means opreg.Kernel().
	Ops *opreg.Registry
	// Session, when set, reports the token name of the browser session a
	// request carries ("" for none) and the CSRF token its sign-out form
	// must send (SPECS.md §18.8, "Signing in").
	Session func(*http.Request) (name, csrf string)
	// Plans, when set, serves the plan pages (plans.go): the executions
	// of the store, read through the runner's Status and List only.
	Plans *plan.Runner
	// PlanForm, when set, returns the CSRF token the approve and reject
	// forms of an execution page must carry (it may set the cookie the
	// token is bound to); nil, or an empty token, renders no forms
	// (SPECS.md §18.7, "The pages").
	PlanForm func(http.ResponseWriter, *http.Request) string
}

const (
	// DefaultMaxPreview is the text preview bound when Options.MaxPreview
	// is zero or negative.
	DefaultMaxPreview = 4 << 10
	// MaxDecode is the largest PEL artifact (program, trace, result, edge,
	// descriptor) the view reads into memory to decode; larger ones are
	// previewed like any other artifact.
	MaxDecode = 64 << 20
	// HexPreview is how many leading bytes of a binary artifact are shown
	// in hex.
	HexPreview = 256
	// ProvDepth bounds the provenance walks ("why" and "uses") of a page,
	// in edges.
	ProvDepth = 2
	// MaxProvRuns bounds the runs listed in each direction of a page's
	// provenance.
	MaxProvRuns = 100
	// MaxTableNodes bounds the rows of a program's node table.
	MaxTableNodes = 1000
	// MaxDAGVertices bounds the boxes and edge bends of a drawn DAG; a
	// larger program is shown as a table only.
	MaxDAGVertices = 3000
	// MaxOutputPreviews bounds how many of a result's outputs are previewed
	// (the rest are listed with their links).
	MaxOutputPreviews = 64
)

// Security headers set on every response.
const (
	headerCSP = "default-src 'self'; style-src 'self'"
)

//go:embed templates/*.html static/style.css
var assets embed.FS

// templates parses the page templates on first use, not at package init:
// every amduat command links this package, and only serve renders pages.
var templates = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("").Funcs(template.FuncMap{
		"add": func(a, b int) int { return a + b },
	}).ParseFS(assets, "templates/*.html"))
})

// styleCSS is the embedded style sheet, read on first use.
var styleCSS = sync.OnceValue(func() []byte { return mustRead(assets, "static/style.css") })

func mustRead(f fs.FS, name string) []byte {
	b, err := fs.ReadFile(f, name)
	if err != nil {
		panic(err)
	}
	return b
}

// handler serves the pages of one store.
type handler struct {
	s          asl.Store
	prefix     string
	rawURL     func(asl.Reference) string
	maxPreview int
	reg        *opreg.Registry
	session    func(*http.Request) (string, string)
	plans      *plan.Runner
	planForm   func(http.ResponseWriter, *http.Request) string
}

// New returns the web view of s. It serves, under opts.Prefix:
//
//	""                 the home page (pins, recent runs, search); ?ref=REF
//	                   opens an artifact, ?ref=NAME what the pin NAME names
//	"a/REF"            the page of one artifact
//	"t/TREE/PATH/"     a directory of a tree, by name
//	"plans/"           the executions of plans (with Options.Plans)
//	"plans/ID"         one execution: its steps, receipts and events
//	"static/style.css" the style sheet
//
// Only GET and HEAD are allowed. A malformed reference is answered 400, a
// missing artifact 404, a damaged one 500 (ERR_INTEGRITY), each with a page
// that says so.
func New(s asl.Store, opts Options) http.Handler {
	prefix := opts.Prefix
	if !strings.HasPrefix(prefix, "/") {
		prefix = "/" + prefix
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	mp := opts.MaxPreview
	if mp <= 0 {
		mp = DefaultMaxPreview
	}
	reg := opts.Ops
	if reg == nil {
		reg = opreg.Kernel()
	}
	templates() // a broken template fails the server's start, not a request
	return &handler{s: s, prefix: prefix, rawURL: opts.RawURL, maxPreview: mp, reg: reg, session: opts.Session,
		plans: opts.Plans, planForm: opts.PlanForm}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", headerCSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		h.errorPage(w, http.StatusMethodNotAllowed, "method not allowed", "This view is read-only: only GET and HEAD are served.")
		return
	}
	if r.Method == http.MethodHead {
		w = headWriter{w}
	}
	rest, ok := strings.CutPrefix(r.URL.Path, h.prefix)
	if !ok && r.URL.Path+"/" == h.prefix {
		rest, ok = "", true
	}
	switch {
	case !ok:
		h.errorPage(w, http.StatusNotFound, "not found", fmt.Sprintf("No page at %s.", r.URL.Path))
	case rest == "":
		h.serveIndex(w, r)
	case rest == "static/style.css":
		hd.Set("Content-Type", "text/css; charset=utf-8")
		hd.Set("Cache-Control", "no-cache")
		w.Write(styleCSS())
	case strings.HasPrefix(rest, "a/") && !strings.Contains(rest[2:], "/"):
		h.serveArtifact(w, r, rest[2:])
	case strings.HasPrefix(rest, "t/"):
		h.serveTree(w, r, rest[2:])
	case rest == "plans":
		http.Redirect(w, r, h.prefix+"plans/", http.StatusSeeOther)
	case strings.HasPrefix(rest, "plans/") && !strings.Contains(rest[6:], "/"):
		h.servePlans(w, r, rest[6:])
	default:
		h.errorPage(w, http.StatusNotFound, "not found", fmt.Sprintf("No page at %s.", r.URL.Path))
	}
}

// headWriter answers HEAD: headers as for GET, no body.
type headWriter struct{ http.ResponseWriter }

func (headWriter) Write(b []byte) (int, error) { return len(b), nil }

// page is what every template receives besides its own data.
type page struct {
	Prefix string
	Title  string
	Query  string // the text in the search box
	Plans  string // the plans page, when the view serves plans
}

type errorPageData struct {
	page
	Status  int
	Heading string
	Message string
}

func (h *handler) page(title, query string) page {
	pg := page{Prefix: h.prefix, Title: title, Query: query}
	if h.plans != nil {
		pg.Plans = h.prefix + "plans/"
	}
	return pg
}

// artifactURL is the page of ref.
func (h *handler) artifactURL(ref asl.Reference) string {
	return h.prefix + "a/" + ref.String()
}

func (h *handler) serveIndex(w http.ResponseWriter, r *http.Request) {
	q, asked := r.URL.Query()["ref"]
	if !asked {
		h.serveHome(w, r)
		return
	}
	text := strings.TrimSpace(q[0])
	if name, ok := h.pinNamed(r.Context(), text); ok {
		// A pin's name finds what it names: its directory page for a tree.
		if info, err := h.s.Stat(r.Context(), name); err == nil && info.HasTag && info.Tag == tree.Tag {
			http.Redirect(w, r, h.treeURL(name, ""), http.StatusSeeOther)
			return
		}
		http.Redirect(w, r, h.artifactURL(name), http.StatusSeeOther)
		return
	}
	ref, ok := h.parseRef(w, text)
	if !ok {
		return
	}
	if _, err := h.s.Stat(r.Context(), ref); err != nil {
		h.storeError(w, ref, text, err)
		return
	}
	http.Redirect(w, r, h.artifactURL(ref), http.StatusSeeOther)
}

// parseRef parses the text form of a reference, accepting upper-case hex,
// and answers 400 when it is malformed.
func (h *handler) parseRef(w http.ResponseWriter, text string) (asl.Reference, bool) {
	if text == "" {
		h.errorPageRef(w, http.StatusBadRequest, "no reference given", "Type a reference: lowercase hex, the hash id (e.g. 0001 for SHA-256) followed by the digest.", text)
		return asl.Reference{}, false
	}
	ref, err := asl.ParseReference(strings.ToLower(text))
	if err != nil {
		h.errorPageRef(w, http.StatusBadRequest, "malformed reference",
			fmt.Sprintf("This is not a reference: %v. A reference is an even number of hex digits: a 4-digit hash id (0001 for SHA-256) followed by the digest (64 digits for SHA-256).", err), text)
		return asl.Reference{}, false
	}
	return ref, true
}

// storeError answers a failed read of the page's own artifact.
func (h *handler) storeError(w http.ResponseWriter, ref asl.Reference, query string, err error) {
	switch {
	case errors.Is(err, asl.ErrNotFound):
		h.errorPageRef(w, http.StatusNotFound, "artifact not found",
			fmt.Sprintf("This store holds no artifact %s (ERR_NOT_FOUND).", ref), query)
	case errors.Is(err, asl.ErrIntegrity):
		h.errorPageRef(w, http.StatusInternalServerError, "ERR_INTEGRITY: damaged artifact",
			fmt.Sprintf("The stored bytes of %s do not match its reference, so none of them are shown. Repair the store by putting the artifact again. (%v)", ref, err), query)
	case errors.Is(err, asl.ErrUnsupported):
		h.errorPageRef(w, http.StatusBadRequest, "ERR_UNSUPPORTED: unknown hash",
			fmt.Sprintf("The reference names hash id 0x%04x, which this store does not support. (%v)", uint16(ref.HashID()), err), query)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The client is gone; nothing useful can be written.
		h.errorPageRef(w, http.StatusServiceUnavailable, "request cancelled", "The request was cancelled.", query)
	default:
		h.errorPageRef(w, http.StatusInternalServerError, "store error",
			fmt.Sprintf("Reading %s from the store failed: %v", ref, err), query)
	}
}

func (h *handler) errorPage(w http.ResponseWriter, status int, heading, msg string) {
	h.errorPageRef(w, status, heading, msg, "")
}

func (h *handler) errorPageRef(w http.ResponseWriter, status int, heading, msg, query string) {
	h.render(w, status, "error", errorPageData{page: h.page(heading, query), Status: status, Heading: heading, Message: msg})
}

// render executes the named template into memory first, so a template
// failure becomes a plain 500 instead of half a page.
func (h *handler) render(w http.ResponseWriter, status int, name string, data any) {
	var b bytes.Buffer
	if err := templates().ExecuteTemplate(&b, name, data); err != nil {
		http.Error(w, "internal error: rendering the page failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

type loginPage struct {
	page
	CSRF    string
	Message string
}

// RenderLogin writes the sign-in page of a view mounted at prefix: a form
// posting a token to prefix+"login" with the CSRF token csrf, and msg (when
// not empty) saying why the last attempt failed.
func RenderLogin(w http.ResponseWriter, prefix string, status int, csrf, msg string) {
	h := New(nil, Options{Prefix: prefix}).(*handler)
	hd := w.Header()
	hd.Set("Content-Security-Policy", headerCSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Cache-Control", "no-store")
	h.render(w, status, "login", loginPage{page: h.page("Sign in", ""), CSRF: csrf, Message: msg})
}
