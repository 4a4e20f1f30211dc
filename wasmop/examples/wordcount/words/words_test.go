package words

import (
	"bytes"
	"testing"
)

func TestCounter(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
	}{
		{"", 0},
		{"   \t\n", 0},
		{"one", 1},
		{" one two  three\n", 3},
		{"a\vb\fc\rd", 4},
		{"caf\u00e9 \u00a0x", 2}, // U+00A0 is not ASCII whitespace: "\u00a0x" is one word
		{"\x00\xff", 1},
		{"a b c d e f g h i j", 10},            // past the 8-byte steps
		{" aaaaaaaaaaaaaaaaa bbbbbbbbb  c", 3}, // words across 8-byte steps
		{"\t\n\v\f\r        x", 1},
	}
	for _, tt := range tests {
		var c Counter
		if n, err := c.Write([]byte(tt.in)); n != len(tt.in) || err != nil {
			t.Errorf("Write(%q) = %d, %v", tt.in, n, err)
		}
		if c.Count() != tt.want {
			t.Errorf("Count(%q) = %d, want %d", tt.in, c.Count(), tt.want)
		}
		// Every split of the input gives the same count.
		for cut := 0; cut <= len(tt.in); cut++ {
			var s Counter
			s.Write([]byte(tt.in[:cut]))
			s.Write([]byte(tt.in[cut:]))
			if s.Count() != tt.want {
				t.Errorf("Count(%q split at %d) = %d, want %d", tt.in, cut, s.Count(), tt.want)
			}
		}
	}
}

func BenchmarkCounter(b *testing.B) {
	buf := bytes.Repeat([]byte("lorem ipsum dolor\tsit amet,\nconsectetur "), 1<<14)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		var c Counter
		c.Write(buf)
	}
}
