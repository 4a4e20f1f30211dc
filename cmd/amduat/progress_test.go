package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestProgressBarLine(t *testing.T) {
	for _, tc := range []struct {
		name     string
		max, cur int64
		bytes    bool
		want     string
	}{
		{"start", 10, 0, false, "nodes   0% [>                             ] (0/10)"},
		{"middle", 10, 5, false, "nodes  50% [===============>              ] (5/10)"},
		{"done", 10, 10, false, "nodes 100% [==============================] (10/10)"},
		{"past the end", 10, 12, false, "nodes 100% [==============================] (10/10)"},
		{"zero max", 0, 0, false, "nodes   0% [>                             ] (0/1)"},
		{"bytes", 3 << 20, 1536, true, "nodes   0% [>                             ] (1.5K/3.0M)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newProgressBar(nil, "nodes", tc.max, tc.bytes)
			b.cur = tc.cur
			if got := b.line(); got != tc.want {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestProgressBarDrawsAndClears checks the first set draws, a set within
// progressEvery does not redraw unless it reaches max, and finish blanks
// the line.
func TestProgressBarDrawsAndClears(t *testing.T) {
	var w bytes.Buffer
	b := newProgressBar(&w, "verify", 4, false)
	b.set(1)
	first := w.String()
	if !strings.HasPrefix(first, "\rverify  25% [") {
		t.Fatalf("first draw %q", first)
	}
	b.set(2)
	if w.String() != first {
		t.Fatalf("redrawn within %v: %q", progressEvery, w.String())
	}
	b.set(4)
	if !strings.HasSuffix(w.String(), "(4/4)") {
		t.Fatalf("reaching max did not draw: %q", w.String())
	}
	n := w.Len()
	b.finish()
	if got := w.String()[n:]; got != "\r"+strings.Repeat(" ", len(b.line()))+"\r" {
		t.Fatalf("finish wrote %q", got)
	}
	b.finish()
	if w.Len() != n+len(b.line())+2 {
		t.Fatal("a second finish wrote again")
	}
}
