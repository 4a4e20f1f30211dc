package httpstore

import (
	"bytes"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
)

// FuzzParseArtifactHeaders: the response header parser never panics, and
// what it accepts is what the headers say: the length, the tag that
// ParseTypeTag reads, a reference header naming the requested one.
func FuzzParseArtifactHeaders(f *testing.F) {
	ref := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("hello")))
	f.Add(int64(5), "", "", false)
	f.Add(int64(5), "0x00000101", ref.String(), true)
	f.Add(int64(-1), "0x1", "", false)
	f.Add(int64(0), "0x", "0001", true)
	f.Add(int64(1<<40), "0xffffffff", "00011f1d", false)
	f.Add(int64(3), "0X1", "zz", true)
	f.Add(int64(3), " 0x1 ", ref.String()+" ", true)
	f.Fuzz(func(t *testing.T, n int64, tag, refHdr string, twice bool) {
		h := http.Header{}
		if tag != "" {
			h.Add(HeaderTypeTag, tag)
		}
		if refHdr != "" {
			h.Add(HeaderRef, refHdr)
			if twice {
				h.Add(HeaderRef, refHdr)
			}
		}
		hdr, err := parseArtifactHeaders(h, n, ref)
		if err != nil {
			if !errors.Is(err, ErrProtocol) && !errors.Is(err, asl.ErrIntegrity) {
				t.Fatalf("error %v is neither ErrProtocol nor ErrIntegrity", err)
			}
			return
		}
		if n < 0 || uint64(n) != hdr.Size {
			t.Fatalf("length %d gave size %d", n, hdr.Size)
		}
		if refHdr != "" && twice {
			t.Fatal("accepted two reference headers")
		}
		if hdr.HasTag != (tag != "") && hdr.HasTag {
			t.Fatalf("tag %q gave %+v", tag, hdr)
		}
		if hdr.HasTag {
			if again, has, err := ParseTypeTag(FormatTypeTag(hdr)); err != nil || !has || again != hdr.Tag {
				t.Fatalf("tag %q: %+v does not round-trip", tag, hdr)
			}
		}
	})
}

// FuzzParseErrorBody: any error body yields a bounded, valid UTF-8 message.
func FuzzParseErrorBody(f *testing.F) {
	f.Add([]byte(`{"error":"x","code":"ERR_NOT_FOUND"}`))
	f.Add([]byte(`<html>bad gateway</html>`))
	f.Add([]byte("\xff\xfe line one\nline two"))
	f.Add([]byte(`{"error":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		code, msg := parseErrorBody(b)
		if len(msg) > 512+len("…") || len(code) > len(b) {
			t.Fatalf("message of %d bytes, code of %d from %d bytes", len(msg), len(code), len(b))
		}
		if !bytes.Equal([]byte(msg), bytes.ToValidUTF8([]byte(msg), nil)) {
			t.Fatalf("message %q is not valid UTF-8", msg)
		}
	})
}

// FuzzParseRetryAfter: never negative, never above maxRetryAfter.
func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"", "0", "120", "-1", "99999999999999999999", "Wed, 21 Oct 2015 07:28:00 GMT", "soon"} {
		f.Add(s)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		if d := parseRetryAfter(s, now); d < 0 || d > maxRetryAfter {
			t.Fatalf("Retry-After %q = %s", s, d)
		}
	})
}

// addFrameSeeds adds the batch bodies both frame decoders' fuzz targets
// start from: valid bodies, a zero bound, lengths past the end or the
// bound, a frame too short for its header, a trailing byte.
func addFrameSeeds(f *testing.F) {
	f.Add([]byte{}, 10, int64(100))
	f.Add(AppendFrame(AppendFrame(nil, asl.Untagged([]byte("hello"))), asl.Tagged(0x101, nil)), 10, int64(100))
	f.Add(AppendFrame(nil, asl.Untagged(nil)), 0, int64(100))
	f.Add([]byte{0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 1, int64(9))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0}, 5, int64(1<<40))
	f.Add([]byte{0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0}, 1, int64(100))
	f.Add([]byte{0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 1, int64(100))
}

// FuzzReadFrames: ReadFrames never panics, and what it accepts is exactly
// the frames AppendFrame writes (the batch body is canonical).
func FuzzReadFrames(f *testing.F) {
	addFrameSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte, maxCount int, maxBytes int64) {
		arts, err := ReadFrames(bytes.NewReader(body), maxCount, maxBytes)
		if err != nil {
			if !errors.Is(err, ErrFrame) && !errors.Is(err, ErrBatchTooLarge) {
				t.Fatalf("error %v is neither ErrFrame nor ErrBatchTooLarge", err)
			}
			return
		}
		if len(arts) > max(maxCount, 0) {
			t.Fatalf("%d frames accepted under a bound of %d", len(arts), maxCount)
		}
		var again []byte
		var total int64
		for _, a := range arts {
			again = AppendFrame(again, a)
			total += FrameLen(a) - 4
		}
		if !bytes.Equal(again, body) {
			t.Fatalf("accepted a body that is not canonical: %x", body)
		}
		if total > maxBytes && len(arts) > 0 {
			t.Fatalf("%d bytes accepted under a bound of %d", total, maxBytes)
		}
		// frameReader writes what AppendFrame does.
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(&frameReader{arts: arts}); err != nil || !bytes.Equal(buf.Bytes(), body) {
			t.Fatalf("frameReader = %x, %v; want %x", buf.Bytes(), err, body)
		}
	})
}

// FuzzDecodeFrames: DecodeFrames of a body held in memory gives exactly
// what ReadFrames gives from a reader of the same bytes: the same
// artifacts, or the same error (text and kind).
func FuzzDecodeFrames(f *testing.F) {
	addFrameSeeds(f)
	f.Add([]byte{0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 2, int64(100))
	f.Fuzz(func(t *testing.T, body []byte, maxCount int, maxBytes int64) {
		want, werr := ReadFrames(bytes.NewReader(body), maxCount, maxBytes)
		got, gerr := DecodeFrames(body, maxCount, maxBytes)
		if (werr == nil) != (gerr == nil) || werr != nil && (werr.Error() != gerr.Error() ||
			errors.Is(werr, ErrFrame) != errors.Is(gerr, ErrFrame) || errors.Is(werr, ErrBatchTooLarge) != errors.Is(gerr, ErrBatchTooLarge)) {
			t.Fatalf("DecodeFrames error %v, ReadFrames error %v", gerr, werr)
		}
		if len(got) != len(want) {
			t.Fatalf("DecodeFrames = %d artifacts, ReadFrames %d", len(got), len(want))
		}
		for i := range got {
			if got[i].Header() != want[i].Header() || !bytes.Equal(got[i].Bytes, want[i].Bytes) {
				t.Fatalf("artifact %d: DecodeFrames %+v, ReadFrames %+v", i, got[i], want[i])
			}
		}
	})
}

// FuzzParseTypeTag: ParseTypeTag never panics; what it accepts formats
// back to a value it reads as the same tag.
func FuzzParseTypeTag(f *testing.F) {
	for _, s := range []string{"", "0x0", "0x00000101", "0xFFFFFFFF", "0x100000000", "0x", "101", "0x-1", "0x+1", "0x 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tag, has, err := ParseTypeTag(s)
		if err != nil {
			return
		}
		if has != (s != "") {
			t.Fatalf("%q: has = %v", s, has)
		}
		if !has {
			return
		}
		out := FormatTypeTag(asl.Header{Tag: tag, HasTag: true})
		if len(out) != 10 {
			t.Fatalf("%q formats as %q", s, out)
		}
		if again, has, err := ParseTypeTag(out); err != nil || !has || again != tag {
			t.Fatalf("%q: %q reads back as %v, %v, %v", s, out, again, has, err)
		}
	})
}
