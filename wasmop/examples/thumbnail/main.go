// Command thumbnail is an example operation for amduat.wasm.run (export
// "thumbnail", 1 output), written with package guest and built with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o thumbnail.wasm .
//
// (go run ./wasmop/examples/rebuild builds the checked-in thumbnail.wasm).
//
// Data input 0 is a PNG or JPEG image. Data input 1, optional, is the
// bound in pixels as decimal text (1..4096, default 128). The output is a
// PNG of the image scaled down, aspect ratio kept, so that neither side
// exceeds the bound (an image that already fits keeps its size); each
// output pixel is the rounded mean of the source pixels its area covers,
// in integer arithmetic. Failure codes: 3 input 0 is not a PNG or JPEG
// image; 4 the bound is malformed or out of range; 5 the image has more
// than 64 million pixels; 6 more than 2 data inputs.
//
// Built for another platform the command does nothing.
package main

import (
	"bytes"
	"image"
	"image/color"
	_ "image/jpeg" // registers the JPEG decoder for image.Decode
	"image/png"
	"strconv"

	"github.com/amduat/amduat/wasmop/guest"
)

// Failure codes (see the command's documentation).
const (
	codeBadImage = 3
	codeBadBound = 4
	codeTooLarge = 5
	codeInputs   = 6
)

const (
	defaultBound = 128
	maxBound     = 4096
	maxPixels    = 64 << 20
)

// parseBound reads the optional bound input.
func parseBound(b []byte) (int, error) {
	n, err := strconv.Atoi(string(b))
	if err != nil || n < 1 || n > maxBound || string(b) != strconv.Itoa(n) {
		return 0, guest.Fail(codeBadBound, "bound %q is not a decimal number in 1..%d", b, maxBound)
	}
	return n, nil
}

// thumbnail decodes src and returns the PNG of its thumbnail within bound.
func thumbnail(src []byte, bound int) ([]byte, error) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(src))
	if err != nil {
		return nil, guest.Fail(codeBadImage, "input 0 is not a PNG or JPEG image: %v", err)
	}
	if int64(cfg.Width)*int64(cfg.Height) > maxPixels {
		return nil, guest.Fail(codeTooLarge, "%s image of %dx%d pixels is above the limit of %d pixels", format, cfg.Width, cfg.Height, maxPixels)
	}
	img, _, err := image.Decode(bytes.NewReader(src))
	if err != nil {
		return nil, guest.Fail(codeBadImage, "decoding the %s image: %v", format, err)
	}
	var out bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(&out, scale(img, bound)); err != nil {
		return nil, guest.Fail(codeBadImage, "encoding the thumbnail: %v", err)
	}
	return out.Bytes(), nil
}

// fit gives the thumbnail size of a w×h image within bound.
func fit(w, h, bound int) (int, int) {
	if w <= bound && h <= bound {
		return w, h
	}
	if w >= h {
		return bound, max(1, (h*bound+w/2)/w)
	}
	return max(1, (w*bound+h/2)/h), bound
}

// scale returns img scaled to fit within bound, each pixel the rounded mean
// (premultiplied 16-bit channels) of the source pixels whose area it covers.
func scale(img image.Image, bound int) *image.RGBA {
	b := img.Bounds()
	sw, sh := b.Dx(), b.Dy()
	dw, dh := fit(sw, sh, bound)
	dst := image.NewRGBA(image.Rect(0, 0, dw, dh))
	for dy := range dh {
		y0, y1 := b.Min.Y+dy*sh/dh, b.Min.Y+(dy+1)*sh/dh
		for dx := range dw {
			x0, x1 := b.Min.X+dx*sw/dw, b.Min.X+(dx+1)*sw/dw
			var r, g, bl, a uint64
			for y := y0; y < y1; y++ {
				for x := x0; x < x1; x++ {
					pr, pg, pb, pa := img.At(x, y).RGBA()
					r, g, bl, a = r+uint64(pr), g+uint64(pg), bl+uint64(pb), a+uint64(pa)
				}
			}
			n := uint64((y1 - y0) * (x1 - x0))
			mean := func(s uint64) uint8 { return uint8(((s + n/2) / n) >> 8) }
			dst.SetRGBA(dx, dy, color.RGBA{R: mean(r), G: mean(g), B: mean(bl), A: mean(a)})
		}
	}
	return dst
}

func main() {}
