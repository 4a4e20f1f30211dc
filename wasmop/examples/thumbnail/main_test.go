package main

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/png"
	"strconv"
	"testing"

	"github.com/amduat/amduat/wasmop/guest"
)

func TestFit(t *testing.T) {
	tests := []struct{ w, h, bound, dw, dh int }{
		{100, 50, 128, 100, 50},
		{256, 128, 128, 128, 64},
		{128, 256, 128, 64, 128},
		{1000, 3, 128, 128, 1},
		{3, 1000, 10, 1, 10},
		{300, 200, 1, 1, 1},
	}
	for _, tt := range tests {
		if dw, dh := fit(tt.w, tt.h, tt.bound); dw != tt.dw || dh != tt.dh {
			t.Errorf("fit(%d, %d, %d) = %d, %d; want %d, %d", tt.w, tt.h, tt.bound, dw, dh, tt.dw, tt.dh)
		}
	}
}

func TestThumbnail(t *testing.T) {
	// A 4x2 image whose 2x2 halves average to known colours.
	src := image.NewRGBA(image.Rect(0, 0, 4, 2))
	left := []color.RGBA{{0, 0, 0, 255}, {100, 50, 10, 255}, {200, 0, 20, 255}, {100, 150, 10, 255}}
	for i, c := range left {
		src.SetRGBA(i%2, i/2, c)
		src.SetRGBA(2+i%2, i/2, color.RGBA{255, 255, 255, 255})
	}
	var in bytes.Buffer
	if err := png.Encode(&in, src); err != nil {
		t.Fatal(err)
	}
	out, err := thumbnail(in.Bytes(), 2)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if img.Bounds() != image.Rect(0, 0, 2, 1) {
		t.Fatalf("bounds %v, want 2x1", img.Bounds())
	}
	if got, want := color.RGBAModel.Convert(img.At(0, 0)), (color.RGBA{100, 50, 10, 255}); got != want {
		t.Errorf("left pixel %v, want %v", got, want)
	}
	if got, want := color.RGBAModel.Convert(img.At(1, 0)), (color.RGBA{255, 255, 255, 255}); got != want {
		t.Errorf("right pixel %v, want %v", got, want)
	}
}

func TestThumbnailFailures(t *testing.T) {
	tests := []struct {
		name string
		err  error
		code uint16
	}{
		{"not an image", second(thumbnail([]byte("GIF89a? no"), 8)), codeBadImage},
		{"bound zero", second(parseBound([]byte("0"))), codeBadBound},
		{"bound too big", second(parseBound([]byte("4097"))), codeBadBound},
		{"bound with sign", second(parseBound([]byte("+5"))), codeBadBound},
		{"bound with space", second(parseBound([]byte("5 "))), codeBadBound},
	}
	for _, tt := range tests {
		var e *guest.Error
		if !errors.As(tt.err, &e) || e.Code != tt.code {
			t.Errorf("%s: %v, want code %d", tt.name, tt.err, tt.code)
		}
	}
	if b, err := parseBound([]byte("4096")); err != nil || b != 4096 {
		t.Errorf("parseBound(4096) = %d, %v", b, err)
	}
}

func second[T any](_ T, err error) error { return err }

// FuzzParseBound: a bound is accepted exactly when it is the canonical
// decimal of a number in 1..4096.
func FuzzParseBound(f *testing.F) {
	for _, s := range []string{"1", "128", "4096", "4097", "0", "01", "+5", " 5", "", "-1", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseBound([]byte(s))
		if err == nil && (n < 1 || n > maxBound || strconv.Itoa(n) != s) {
			t.Fatalf("parseBound(%q) accepted %d", s, n)
		}
		if err != nil {
			var e *guest.Error
			if !errors.As(err, &e) || e.Code != codeBadBound {
				t.Fatalf("parseBound(%q): %v", s, err)
			}
		}
	})
}

// FuzzThumbnail: any bytes give a PNG within the bound or a coded failure,
// never a panic. Inputs are small, so decoding stays small.
func FuzzThumbnail(f *testing.F) {
	var b bytes.Buffer
	png.Encode(&b, image.NewGray(image.Rect(0, 0, 5, 3)))
	f.Add(b.Bytes(), 2)
	f.Add([]byte("\xff\xd8\xff"), 8)
	f.Fuzz(func(t *testing.T, src []byte, bound int) {
		if len(src) > 1<<16 {
			return
		}
		bound = 1 + (bound&0x7fffffff)%maxBound
		cfg, _, err := image.DecodeConfig(bytes.NewReader(src))
		if err == nil && int64(cfg.Width)*int64(cfg.Height) > 1<<22 {
			return // a header claiming a large image: the decoder would allocate it
		}
		out, err := thumbnail(src, bound)
		if err != nil {
			var e *guest.Error
			if !errors.As(err, &e) || e.Code < codeBadImage || e.Code > codeTooLarge {
				t.Fatalf("thumbnail: %v", err)
			}
			return
		}
		img, err := png.Decode(bytes.NewReader(out))
		if err != nil {
			t.Fatalf("output is not a PNG: %v", err)
		}
		if r := img.Bounds(); r.Dx() > bound || r.Dy() > bound || r.Dx() < 1 || r.Dy() < 1 {
			t.Fatalf("thumbnail %v for bound %d", r, bound)
		}
	})
}
