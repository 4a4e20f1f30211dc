package pebblestore

import (
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/amduat/amduat/asl/zcodec"
)

var (
	zstdOnce sync.Once
	zdec     *zstd.Decoder
)

// codecs returns the shared zstd encoder (zcodec's) and decoder. EncodeAll
// and DecodeAll are safe for concurrent use; each keeps an internal pool
// sized to GOMAXPROCS. The decoder refuses to produce more than
// MaxChunkSize bytes or more than the capacity of the destination it is
// given.
func codecs() (*zstd.Encoder, *zstd.Decoder) {
	zstdOnce.Do(func() {
		var err error
		zdec, err = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithDecoderMaxMemory(MaxChunkSize),
			zstd.WithDecoderMaxWindow(MaxChunkSize),
			zstd.WithDecodeAllCapLimit(true))
		if err != nil {
			panic(err)
		}
	})
	return zcodec.Encoder(), zdec
}

// compressChunk decides how to store raw: zcodec.Compress, the decision
// every backend shares (chunks shorter than minSize raw, a sample first,
// kept only if it saves an eighth). scratch is reused for the compressed
// output when its capacity suffices; the returned payload is raw or the
// compressed bytes.
func compressChunk(raw, scratch []byte, minSize int) (uint8, []byte) {
	if z, out := zcodec.Compress(raw, scratch, minSize); z {
		return codecZstd, out
	}
	return codecRaw, raw
}

// decodeSlack is the spare capacity decompress wants past the raw size:
// with at least 16 bytes of room past a block, klauspost/compress decodes
// every block with its wide copies rather than the bounds-exact ones it
// must use for a block that ends at the destination's capacity (the last
// block of every chunk); that decodes text ~40% faster.
const decodeSlack = 64

// decompress decodes a zstd payload that must expand to exactly raw bytes,
// into dst (reused when its capacity suffices). The frame must declare its
// content size as raw, and decoding stops at raw+decodeSlack bytes, so a
// hostile payload cannot make it allocate more (nor write past dst's
// capacity). A dst with decodeSlack spare capacity decodes faster; one of
// capacity raw still works.
func decompress(payload []byte, raw uint64, dst []byte) ([]byte, error) {
	var fh zstd.Header
	if err := fh.Decode(payload); err != nil {
		return nil, damaged("zstd frame header: %v", err)
	}
	if !fh.HasFCS || fh.FrameContentSize != raw {
		return nil, damaged("zstd frame declares %d bytes (present %v), record says %d", fh.FrameContentSize, fh.HasFCS, raw)
	}
	limit := raw + decodeSlack
	switch {
	case uint64(cap(dst)) < raw:
		dst = make([]byte, 0, limit)
	case uint64(cap(dst)) < limit:
		limit = raw
	}
	_, dec := codecs()
	out, err := dec.DecodeAll(payload, dst[:0:limit])
	if err != nil {
		return nil, damaged("zstd payload: %v", err)
	}
	if uint64(len(out)) != raw {
		return nil, damaged("zstd payload expands to %d bytes, record says %d", len(out), raw)
	}
	return out, nil
}
