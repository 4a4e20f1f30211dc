package webui

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/pel"
)

// refView is a reference as pages show it: the full text form, a short
// form for lists, the link to its page and, if configured, its download link.
type refView struct {
	Text  string
	Short string
	Href  string
	Raw   string
}

func (h *handler) refView(r asl.Reference) refView {
	v := refView{Text: r.String(), Href: h.artifactURL(r)}
	v.Short = shortRef(v.Text)
	if h.rawURL != nil {
		v.Raw = h.rawURL(r)
	}
	return v
}

func (h *handler) refPtr(r asl.Reference) *refView {
	v := h.refView(r)
	return &v
}

func (h *handler) refViews(rs []asl.Reference) []refView {
	out := make([]refView, len(rs))
	for i, r := range rs {
		out[i] = h.refView(r)
	}
	return out
}

// shortRef abbreviates the text form of a reference to its hash id, the
// first 8 and the last 4 digits of its digest.
func shortRef(s string) string {
	if len(s) <= 20 {
		return s
	}
	return s[:12] + "…" + s[len(s)-4:]
}

// printable renders bytes meant as text (operation names, diagnostic
// messages) so that nothing in them can disturb the page: valid printable
// UTF-8 is kept, invalid bytes become \xNN and other non-graphic runes Go
// escapes. HTML escaping is html/template's job.
func printable(b []byte) string {
	var sb strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&sb, `\x%02x`, b[0])
		case r == '\\':
			sb.WriteString(`\\`)
		case unicode.IsGraphic(r):
			sb.WriteRune(r)
		default:
			q := strconv.QuoteRune(r)
			sb.WriteString(q[1 : len(q)-1])
		}
		b = b[n:]
	}
	return sb.String()
}

// truncateText cuts s to at most max bytes at a rune boundary, adding an
// ellipsis when it cut.
func truncateText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// truncateRunes cuts s to at most max runes, the last one an ellipsis when
// it cut.
func truncateRunes(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	n := 0
	for i := range s {
		if n == max-1 {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

// sizeText renders a byte count exactly, with a binary-unit figure for
// large ones.
func sizeText(n uint64) string {
	unit := "bytes"
	if n == 1 {
		unit = "byte"
	}
	exact := fmt.Sprintf("%d %s", n, unit)
	if n < 1<<10 {
		return exact
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v, i := n, -1
	for v >= 1<<20 && i < len(units)-2 {
		v >>= 10
		i++
	}
	// One decimal from integer arithmetic, so the text is the same everywhere.
	tenths := (v*10 + 512) >> 10
	return fmt.Sprintf("%d.%d %s (%s)", tenths/10, tenths%10, units[i+1], exact)
}

func tagText(h asl.Header) string {
	if !h.HasTag {
		return "none"
	}
	return fmt.Sprintf("0x%08x", uint32(h.Tag))
}

// kindOf names the PEL and TGK artifact types the view decodes.
func kindOf(h asl.Header) string {
	if !h.HasTag {
		return ""
	}
	switch h.Tag {
	case asl.TagPELProgramDAG1:
		return "program"
	case asl.TagPELTraceDAG1:
		return "trace"
	case asl.TagPEL1Result1:
		return "result"
	case asl.TagTGK1EdgeV1:
		return "provenance edge"
	case pel.TagSchemeDescriptor:
		return "scheme descriptor"
	}
	return ""
}

// statusClass is the CSS class of an execution status.
func statusClass(s pel.ExecutionStatus) string {
	if s == pel.StatusOK {
		return "st-ok"
	}
	return "st-failed"
}

func codeText(c uint32) string { return codeHex(c) }

type diagView struct {
	Code    string
	Message string
}

func diagViews(ds []pel.DiagnosticEntry) []diagView {
	out := make([]diagView, len(ds))
	for i, d := range ds {
		out[i] = diagView{Code: fmt.Sprintf("0x%08x", d.Code), Message: printable(d.Message)}
	}
	return out
}

// previewView is the start of an artifact's payload: text, or hex lines.
type previewView struct {
	Size      string
	Empty     bool
	IsText    bool
	Text      string
	Shown     string // how much of the payload is shown, when not all of it
	Truncated bool
	Hex       []hexLine
	HexHead   string // the first bytes in hex, for compact listings
}

type hexLine struct {
	Offset string
	Hex    string
	ASCII  string
}

// isPrintableText reports whether b is valid UTF-8 made of graphic runes
// and ordinary whitespace.
func isPrintableText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if r != '\n' && r != '\t' && r != '\r' && !unicode.IsGraphic(r) {
			return false
		}
	}
	return true
}

// makePreview builds the preview of an artifact of total bytes whose
// payload starts with b (all of it when len(b) == total): text up to
// textMax bytes when that start is printable UTF-8, else hex of the first
// HexPreview bytes.
func makePreview(b []byte, total uint64, textMax int) *previewView {
	p := &previewView{Size: sizeText(total)}
	if total == 0 {
		p.Empty = true
		return p
	}
	t := b[:min(len(b), textMax)]
	if uint64(len(t)) < total {
		// A cut may split the last rune; drop its incomplete start.
		for i := 1; i <= utf8.UTFMax-1 && i <= len(t); i++ {
			if utf8.RuneStart(t[len(t)-i]) {
				if !utf8.FullRune(t[len(t)-i:]) {
					t = t[:len(t)-i]
				}
				break
			}
		}
	}
	if len(t) > 0 && isPrintableText(t) {
		p.IsText = true
		p.Text = string(t)
		if uint64(len(t)) < total {
			p.Truncated = true
			p.Shown = fmt.Sprintf("the first %s of %s", sizeText(uint64(len(t))), sizeText(total))
		}
		return p
	}
	hb := b[:min(len(b), HexPreview)]
	for off := 0; off < len(hb); off += 16 {
		row := hb[off:min(off+16, len(hb))]
		var hx, asc strings.Builder
		for i, c := range row {
			if i == 8 {
				hx.WriteByte(' ')
			}
			if i > 0 {
				hx.WriteByte(' ')
			}
			hx.WriteString(hex.EncodeToString([]byte{c}))
			if c >= 0x20 && c < 0x7f {
				asc.WriteByte(c)
			} else {
				asc.WriteByte('.')
			}
		}
		p.Hex = append(p.Hex, hexLine{Offset: fmt.Sprintf("%08x", off), Hex: fmt.Sprintf("%-48s", hx.String()), ASCII: asc.String()})
	}
	p.HexHead = hex.EncodeToString(b[:min(len(b), 32)])
	if len(b) > 32 {
		p.HexHead += "…"
	}
	if uint64(len(hb)) < total {
		p.Truncated = true
		p.Shown = fmt.Sprintf("the first %s of %s", sizeText(uint64(len(hb))), sizeText(total))
	}
	return p
}

// fetchPreview reads the start of ref's payload through Fetch, at most
// max(textMax, HexPreview) bytes, and builds its preview. An artifact that
// fits is read to its end, so the store checks its digest; a longer one is
// read only as far as the bound, where the store checks what it returns
// (per-chunk checksums for chunked artifacts, SPECS.md §6.2).
func (h *handler) fetchPreview(ctx context.Context, ref asl.Reference, textMax int) (*previewView, error) {
	rc, hdr, err := h.s.Fetch(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	bound := max(textMax, HexPreview)
	var b []byte
	if hdr.Size <= uint64(bound) {
		b, err = io.ReadAll(io.LimitReader(rc, int64(bound)+1))
		if err == nil && uint64(len(b)) != hdr.Size {
			err = fmt.Errorf("%s: read %d bytes, header says %d: %w", ref, len(b), hdr.Size, asl.ErrIntegrity)
		}
	} else {
		b = make([]byte, bound)
		_, err = io.ReadFull(rc, b)
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			err = fmt.Errorf("%s: payload shorter than its header's %d bytes: %w", ref, hdr.Size, asl.ErrIntegrity)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("preview of %s: %w", ref, err)
	}
	return makePreview(b, hdr.Size, textMax), nil
}

// errText says in a few words why a related artifact could not be shown.
func errText(err error) string {
	switch {
	case errors.Is(err, asl.ErrNotFound):
		return "not in this store (ERR_NOT_FOUND)"
	case errors.Is(err, asl.ErrIntegrity):
		return "damaged: its stored bytes do not match its reference (ERR_INTEGRITY)"
	case errors.Is(err, asl.ErrUnsupported):
		return "under a hash this store does not support (ERR_UNSUPPORTED)"
	}
	return err.Error()
}
