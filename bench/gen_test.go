package bench

import (
	"bytes"
	"io"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// readIn reads a stream with reads of the given size.
func readIn(t *testing.T, r io.Reader, chunk int) []byte {
	t.Helper()
	var out []byte
	buf := make([]byte, chunk)
	for {
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestStreamDeterministic(t *testing.T) {
	for _, k := range []Kind{Random, Text} {
		t.Run(k.String(), func(t *testing.T) {
			const n = 300_001
			a := readIn(t, NewStream(k, 1, n), 1<<16)
			if len(a) != n {
				t.Fatalf("stream gave %d bytes, want %d", len(a), n)
			}
			for _, chunk := range []int{1, 7, 4095, 4097, n + 5} {
				if b := readIn(t, NewStream(k, 1, n), chunk); !bytes.Equal(a, b) {
					t.Fatalf("reading in %d-byte reads gives other bytes", chunk)
				}
			}
			if b := readIn(t, NewStream(k, 2, n), 1<<16); bytes.Equal(a, b) {
				t.Fatal("seeds 1 and 2 give the same bytes")
			}
			if b := readIn(t, NewStream(k, 1, 1000), 1<<16); !bytes.Equal(a[:1000], b) {
				t.Fatal("a shorter stream is not a prefix of the longer one")
			}
			if b := readIn(t, NewStream(k, 1, 0), 16); len(b) != 0 {
				t.Fatal("empty stream gave bytes")
			}
		})
	}
	if bytes.Equal(readIn(t, NewStream(Random, 1, 4096), 4096), readIn(t, NewStream(Text, 1, 4096), 4096)) {
		t.Fatal("kinds give the same bytes")
	}
}

// TestStreamCompressibility pins what the kinds are for: random bytes do
// not compress, text compresses to between a quarter and a half (prose-like),
// and text is printable with lines and sentences.
func TestStreamCompressibility(t *testing.T) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		t.Fatal(err)
	}
	const n = 1 << 20
	random := readIn(t, NewStream(Random, 9, n), n)
	if z := len(enc.EncodeAll(random, nil)); z < n {
		t.Errorf("random stream compresses to %d of %d bytes", z, n)
	}
	text := readIn(t, NewStream(Text, 9, n), n)
	if z := len(enc.EncodeAll(text, nil)); z < n/4 || z > n/2 {
		t.Errorf("text stream compresses to %d of %d bytes, want between a quarter and a half", z, n)
	}
	for i, c := range text {
		if c != '\n' && (c < ' ' || c > '~') {
			t.Fatalf("text byte %d is 0x%02x", i, c)
		}
	}
	if lines := bytes.Count(text, []byte("\n")); lines < n/200 {
		t.Errorf("text has %d lines in %d bytes", lines, n)
	}
	if bytes.Count(text, []byte(". ")) < n/300 {
		t.Error("text has too few sentences")
	}
}

func TestFillRandom(t *testing.T) {
	a, b, c := make([]byte, 1027), make([]byte, 1027), make([]byte, 1027)
	FillRandom(a, 1, 5)
	FillRandom(b, 1, 5)
	FillRandom(c, 1, 6)
	if !bytes.Equal(a, b) || bytes.Equal(a, c) {
		t.Fatal("FillRandom is not deterministic per (seed, index)")
	}
	FillRandom(c, 2, 5)
	if bytes.Equal(a, c) {
		t.Fatal("FillRandom ignores the seed")
	}
}

func benchStream(b *testing.B, k Kind) {
	buf := make([]byte, streamBuf)
	b.SetBytes(64 << 20)
	for b.Loop() {
		io.CopyBuffer(io.Discard, NewStream(k, 1, 64<<20), buf)
	}
}

// BenchmarkStream measures the generators alone: their cost is part of the
// put figures and of the put baselines alike.
func BenchmarkStreamRandom(b *testing.B) { benchStream(b, Random) }
func BenchmarkStreamText(b *testing.B)   { benchStream(b, Text) }
