package zcodec

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"testing"
)

func TestCompress(t *testing.T) {
	text := bytes.Repeat([]byte("the same line of text, again and again\n"), 4000)
	noise := make([]byte, 200<<10)
	for i := 0; i < len(noise); i += 32 {
		s := sha256.Sum256([]byte{byte(i), byte(i >> 8), byte(i >> 16)})
		copy(noise[i:], s[:])
	}
	for _, c := range []struct {
		name string
		raw  []byte
		min  int
		want bool
	}{
		{"short", text[:DefaultMinSize-1], DefaultMinSize, false},
		{"text", text, DefaultMinSize, true},
		{"noise (sample refuses)", noise, DefaultMinSize, false},
		{"noise below the sample size", noise[:8<<10], DefaultMinSize, false},
		{"off", text, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			z, out := Compress(c.raw, nil, c.min)
			if z != c.want {
				t.Fatalf("Compress = %v, want %v", z, c.want)
			}
			if !z {
				if !bytes.Equal(out, c.raw) {
					t.Fatal("raw output differs from the input")
				}
				return
			}
			if !Pays(len(out), len(c.raw)) {
				t.Fatalf("kept %d of %d bytes", len(out), len(c.raw))
			}
			got, err := DecodeExact(out, uint64(len(c.raw)), nil)
			if err != nil || !bytes.Equal(got, c.raw) {
				t.Fatalf("DecodeExact: %v", err)
			}
		})
	}
}

func TestDecodeExactRejects(t *testing.T) {
	text := bytes.Repeat([]byte("abc"), 10000)
	_, frame := Compress(text, nil, DefaultMinSize)
	for _, c := range []struct {
		name  string
		frame []byte
		raw   uint64
	}{
		{"wrong size", frame, uint64(len(text)) + 1},
		{"cut", frame[:len(frame)/2], uint64(len(text))},
		{"two frames", append(bytes.Clone(frame), frame...), uint64(len(text))},
		{"not zstd", []byte("plain text, no frame"), 20},
		{"empty", nil, 0},
	} {
		if _, err := DecodeExact(c.frame, c.raw, nil); !errors.Is(err, ErrFrame) {
			t.Errorf("%s: DecodeExact = %v, want ErrFrame", c.name, err)
		}
	}
}
