package webui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/tree"
	"github.com/amduat/amduat/surf"
)

// The pages for people who browse (SPECS.md §18.8): the home page with the
// pins and the recent runs, and a tree's directories by name.

const (
	// MaxHomePins bounds the pins listed on the home page.
	MaxHomePins = 200
	// MaxHomeRuns is how many of the newest run-log records the home page
	// lists.
	MaxHomeRuns = 20
	// MaxTreeEntries bounds the rows of a directory page.
	MaxTreeEntries = 5000
)

type pinView struct {
	Name   string
	Ref    refView
	Browse string // the directory page when the pin names a tree
}

type runView struct {
	Seq     uint64
	Time    string
	Status  string
	Class   string
	Result  refView
	Program refView
}

type homePage struct {
	page
	Pins        []pinView
	PinsNote    string
	PinsOmitted int
	Runs        []runView
	RunsNote    string
	SignedIn    string // the token name of a browser session
	LogoutCSRF  string
}

// serveHome renders the home page: the search box, the pins (when the store
// keeps them) and the newest runs of the run log (when it has one).
func (h *handler) serveHome(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	p := homePage{page: h.page("amduat", "")}
	if h.session != nil {
		p.SignedIn, p.LogoutCSRF = h.session(r)
	}
	if pn, ok := h.s.(asl.Pinner); ok {
		pins, err := pn.Pins(ctx)
		if err != nil {
			p.PinsNote = fmt.Sprintf("The pins could not be read: %s", printable([]byte(err.Error())))
		}
		if len(pins) > MaxHomePins {
			p.PinsOmitted = len(pins) - MaxHomePins
			pins = pins[:MaxHomePins]
		}
		for _, pin := range pins {
			v := pinView{Name: printable([]byte(pin.Name)), Ref: h.refView(pin.Ref)}
			if info, err := h.s.Stat(ctx, pin.Ref); err == nil && info.HasTag && info.Tag == tree.Tag {
				v.Browse = h.treeURL(pin.Ref, "")
			}
			p.Pins = append(p.Pins, v)
		}
	} else {
		p.PinsNote = "This store keeps no pins."
	}
	if ix, ok := h.s.(asl.Indexer); ok {
		ring := make([]surf.LogRecord, 0, MaxHomeRuns)
		_, err := surf.ReadLog(ctx, ix, surf.LogFilter{}, func(rec surf.LogRecord) error {
			if len(ring) == MaxHomeRuns {
				copy(ring, ring[1:])
				ring = ring[:MaxHomeRuns-1]
			}
			ring = append(ring, rec)
			return nil
		}, nil)
		if err != nil {
			p.RunsNote = fmt.Sprintf("The run log could not be read: %s", printable([]byte(err.Error())))
		}
		for i := len(ring) - 1; i >= 0; i-- {
			rec := ring[i]
			p.Runs = append(p.Runs, runView{
				Seq:     rec.Seq,
				Time:    rec.Time.UTC().Format("2006-01-02 15:04:05Z"),
				Status:  rec.Status.String(),
				Class:   statusClass(rec.Status),
				Result:  h.refView(rec.ResultRef),
				Program: h.refView(rec.ProgramRef),
			})
		}
	} else {
		p.RunsNote = "This store keeps no run log."
	}
	h.render(w, http.StatusOK, "index", p)
}

// treeURL is the directory page of path (slash-separated, "" for the top)
// inside the tree root.
func (h *handler) treeURL(root asl.Reference, path string) string {
	u := h.prefix + "t/" + root.String() + "/"
	if path != "" {
		u += (&url.URL{Path: path}).EscapedPath() + "/"
	}
	return u
}

type crumb struct {
	Name string
	Href string
}

type treeEntryView struct {
	Name       string
	Kind       string
	Executable bool
	Size       string
	Href       string // the directory page of a directory, else the artifact page
	Raw        string // download link of a file or a link target
	Ref        refView
}

type treePage struct {
	page
	Root    refView
	Crumbs  []crumb
	Here    refView
	Entries []treeEntryView
	Omitted int
}

// serveTree renders "t/TREE/PATH/": the directory at PATH inside TREE, by
// name, with sizes and links.
func (h *handler) serveTree(w http.ResponseWriter, r *http.Request, rest string) {
	ctx := r.Context()
	text, path, _ := strings.Cut(rest, "/")
	root, ok := h.parseRef(w, text)
	if !ok {
		return
	}
	path = strings.Trim(path, "/")
	dir := root
	if path != "" {
		e, err := tree.Resolve(ctx, h.s, root, path)
		if err != nil {
			h.treeError(w, root, path, err)
			return
		}
		if e.Kind != tree.Dir {
			http.Redirect(w, r, h.artifactURL(e.Ref), http.StatusSeeOther)
			return
		}
		dir = e.Ref
	}
	entries, err := tree.Load(ctx, h.s, dir)
	if err != nil {
		h.treeError(w, root, path, err)
		return
	}
	title := "tree " + shortRef(root.String())
	if path != "" {
		title = path + " · " + title
	}
	p := treePage{page: h.page(title, root.String()), Root: h.refView(root), Here: h.refView(dir)}
	p.Crumbs = append(p.Crumbs, crumb{Name: shortRef(root.String()), Href: h.treeURL(root, "")})
	if path != "" {
		parts := strings.Split(path, "/")
		for i := range parts {
			p.Crumbs = append(p.Crumbs, crumb{Name: printable([]byte(parts[i])), Href: h.treeURL(root, strings.Join(parts[:i+1], "/"))})
		}
	}
	if len(entries) > MaxTreeEntries {
		p.Omitted = len(entries) - MaxTreeEntries
		entries = entries[:MaxTreeEntries]
	}
	for _, e := range entries {
		v := treeEntryView{Name: printable([]byte(e.Name)), Kind: e.Kind.String(), Executable: e.Executable,
			Size: sizeText(e.Size), Ref: h.refView(e.Ref)}
		sub := e.Name
		if path != "" {
			sub = path + "/" + e.Name
		}
		if e.Kind == tree.Dir {
			v.Href = h.treeURL(root, sub)
		} else {
			v.Href = h.artifactURL(e.Ref)
			v.Raw = v.Ref.Raw
		}
		p.Entries = append(p.Entries, v)
	}
	h.render(w, http.StatusOK, "tree", p)
}

func (h *handler) treeError(w http.ResponseWriter, root asl.Reference, path string, err error) {
	switch {
	case errors.Is(err, tree.ErrPath):
		h.errorPageRef(w, http.StatusNotFound, "no such path",
			fmt.Sprintf("The tree %s holds nothing at %q.", root, printable([]byte(path))), root.String())
	case errors.Is(err, tree.ErrNotTree):
		h.errorPageRef(w, http.StatusNotFound, "not a tree",
			fmt.Sprintf("%s is not a directory tree (type tag 0x%08x): %s", root, uint32(tree.Tag), printable([]byte(err.Error()))), root.String())
	default:
		h.storeError(w, root, root.String(), err)
	}
}

// pinNamed returns what the pin name names, when the store keeps pins and
// has one of that name.
func (h *handler) pinNamed(ctx context.Context, name string) (asl.Reference, bool) {
	pn, ok := h.s.(asl.Pinner)
	if !ok || name == "" {
		return asl.Reference{}, false
	}
	pins, err := pn.Pins(ctx)
	if err != nil {
		return asl.Reference{}, false
	}
	for _, p := range pins {
		if p.Name == name {
			return p.Ref, true
		}
	}
	return asl.Reference{}, false
}
