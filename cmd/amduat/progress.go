package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// progressBar draws "desc  42% [========>           ] (1.2 MiB/2.8 MiB)" on
// one terminal line, redrawn at most every progressEvery and cleared by
// finish. It is only drawn on a terminal's stderr (the callers check
// stderrIsTerminal), so no test or pipe sees it. It replaced
// github.com/schollz/progressbar, whose package inits (with
// mitchellh/colorstring's) every command paid (issue 24).
type progressBar struct {
	w     io.Writer
	desc  string
	max   int64
	bytes bool // show the counts as byte sizes
	cur   int64
	last  time.Time // last draw; zero before the first
	width int       // of the last line drawn, to clear it
}

const (
	progressEvery = 100 * time.Millisecond
	progressCells = 30
)

// newProgressBar returns a bar towards max (at least 1).
func newProgressBar(w io.Writer, desc string, max int64, bytes bool) *progressBar {
	return &progressBar{w: w, desc: desc, max: max, bytes: bytes}
}

// set records n done and redraws when progressEvery has passed since the
// last draw, or when n reaches max.
func (b *progressBar) set(n int64) {
	b.cur = n
	if now := time.Now(); b.last.IsZero() || now.Sub(b.last) >= progressEvery || n >= b.max {
		b.last = now
		b.draw()
	}
}

// line renders the bar at its current count.
func (b *progressBar) line() string {
	total := max(b.max, 1)
	cur := min(total, max(b.cur, 0))
	filled := int(cur * progressCells / total)
	bar := strings.Repeat("=", filled)
	if filled < progressCells {
		bar += ">" + strings.Repeat(" ", progressCells-filled-1)
	}
	count := fmt.Sprintf("%d/%d", cur, total)
	if b.bytes {
		count = humanSize(uint64(cur)) + "/" + humanSize(uint64(total))
	}
	return fmt.Sprintf("%s %3d%% [%s] (%s)", b.desc, cur*100/total, bar, count)
}

func (b *progressBar) draw() {
	l := b.line()
	pad := ""
	if len(l) < b.width {
		pad = strings.Repeat(" ", b.width-len(l))
	}
	b.width = len(l)
	fmt.Fprintf(b.w, "\r%s%s", l, pad)
}

// finish clears the bar's line.
func (b *progressBar) finish() {
	if b.width > 0 {
		fmt.Fprintf(b.w, "\r%s\r", strings.Repeat(" ", b.width))
		b.width = 0
	}
}
