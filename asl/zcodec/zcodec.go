// Package zcodec holds the one decision every backend makes about
// compression (DESIGN.md, SPECS.md §6.4 "Chunking and compression", §6.7):
// zstd at its fastest level, only where it pays. A chunk shorter than the
// minimum is stored raw; a chunk of at least 4 × 16 KiB is first sampled
// (its first 16 KiB compressed) and stored raw when the sample does not
// save an eighth; otherwise the whole chunk is compressed (one frame, its
// content size declared, window 1 MiB) and kept only if that saves an
// eighth. Backends keep their own framing and decoding limits.
package zcodec

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
)

const (
	// SampleSize is how much of a chunk is compressed first to decide
	// whether compressing the rest can pay.
	SampleSize = 16 << 10
	// DefaultMinSize is the smallest chunk worth trying (zstd cannot pay
	// below it).
	DefaultMinSize = 4 << 10
	// Window is the encoder's window: a decoder needs at most this much
	// history (or the frame's content size, when smaller).
	Window = 1 << 20
)

var (
	encOnce sync.Once
	enc     *zstd.Encoder
)

// Encoder returns the shared encoder (EncodeAll is safe for concurrent
// use).
func Encoder() *zstd.Encoder {
	encOnce.Do(func() {
		var err error
		enc, err = zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithWindowSize(Window),
			zstd.WithZeroFrames(true))
		if err != nil {
			panic(err)
		}
	})
	return enc
}

// Pays reports whether a compressed size n for raw size raw saves at least
// one eighth.
func Pays(n, raw int) bool { return n <= raw-raw/8 }

// Compress decides how to store raw (see the package comment): it returns
// true and one zstd frame when compressing pays, else false and raw.
// scratch is reused for the frame when its capacity suffices.
func Compress(raw, scratch []byte, minSize int) (bool, []byte) {
	if minSize <= 0 || len(raw) < minSize {
		return false, raw
	}
	e := Encoder()
	if len(raw) >= 4*SampleSize {
		s := e.EncodeAll(raw[:SampleSize], scratch[:0])
		if !Pays(len(s), SampleSize) {
			return false, raw
		}
	}
	out := e.EncodeAll(raw, scratch[:0])
	if !Pays(len(out), len(raw)) {
		return false, raw
	}
	return true, out
}

// ErrFrame marks a frame that is not one zstd frame decoding to exactly
// the size its container records.
var ErrFrame = errors.New("zstd frame")

var decPool = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxWindow(64<<20),
		zstd.WithDecoderLowmem(true))
	if err != nil {
		panic(err)
	}
	return d
}}

// DecodeExact decodes frame, which must declare its content size as raw
// and decode to exactly raw bytes, into dst (reused when its capacity
// suffices). It streams, so what it allocates grows with what the frame
// yields, never past raw+1 bytes, whatever raw claims. Every failure
// wraps ErrFrame.
func DecodeExact(frame []byte, raw uint64, dst []byte) ([]byte, error) {
	var fh zstd.Header
	if err := fh.Decode(frame); err != nil {
		return nil, fmt.Errorf("%w header: %v", ErrFrame, err)
	}
	if !fh.HasFCS || fh.FrameContentSize != raw {
		return nil, fmt.Errorf("%w declares %d bytes (present %v), want %d", ErrFrame, fh.FrameContentSize, fh.HasFCS, raw)
	}
	d := decPool.Get().(*zstd.Decoder)
	defer decPool.Put(d)
	if err := d.Reset(&sliceReader{b: frame}); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFrame, err)
	}
	defer d.Reset(nil)
	out := dst[:0]
	if uint64(cap(out)) > raw+1 {
		out = out[: 0 : raw+1]
	}
	buf := out
	for {
		if len(buf) == cap(buf) {
			if uint64(len(buf)) > raw {
				return nil, fmt.Errorf("%w decodes to more than %d bytes", ErrFrame, raw)
			}
			n := min(max(2*cap(buf), 64<<10), int(min(raw+1, 1<<40)))
			nb := make([]byte, len(buf), n)
			copy(nb, buf)
			buf = nb
		}
		n, err := d.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrFrame, err)
		}
	}
	if uint64(len(buf)) != raw {
		return nil, fmt.Errorf("%w decodes to %d bytes, want %d", ErrFrame, len(buf), raw)
	}
	return buf, nil
}

type sliceReader struct{ b []byte }

func (r *sliceReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}
