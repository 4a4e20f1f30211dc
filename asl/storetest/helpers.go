package storetest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/amduat/amduat/asl"
)

// gen returns n deterministic pseudo-random bytes (never nil).
func gen(seed uint64, n int) []byte {
	b := make([]byte, n)
	genRand(seed).Read(b)
	return b
}

func genRand(seed uint64) *rand.ChaCha8 {
	var s [32]byte
	for i := range 8 {
		s[i] = byte(seed >> (8 * i))
	}
	s[31] = 0xa5
	return rand.NewChaCha8(s)
}

// stream is a reader of n deterministic bytes that is not one of the
// in-memory readers (*bytes.Reader, …) a backend may special-case, so a
// put through it streams.
type stream struct {
	rng  *rand.ChaCha8
	left int64
}

func newStream(seed uint64, n int64) *stream { return &stream{rng: genRand(seed), left: n} }

func (s *stream) Read(p []byte) (int, error) {
	if s.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > s.left {
		p = p[:s.left]
	}
	s.rng.Read(p)
	s.left -= int64(len(p))
	return len(p), nil
}

// onlyReader hides every method of r but Read.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// fetchAll reads ref whole through Fetch, returning what the reader said.
func fetchAll(ctx context.Context, b Backend, ref asl.Reference) (asl.Header, []byte, error) {
	rc, hdr, err := b.Fetch(ctx, ref)
	if err != nil {
		return asl.Header{}, nil, err
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	return hdr, got, err
}

// checkStored fetches and stats ref and compares them with a.
func checkStored(t *testing.T, b Backend, ref asl.Reference, a asl.Artifact) {
	t.Helper()
	ctx := t.Context()
	hdr, got, err := fetchAll(ctx, b, ref)
	if err != nil {
		t.Fatalf("Fetch(%s): %v", ref, err)
	}
	if hdr != a.Header() {
		t.Errorf("Fetch(%s) header = %+v, want %+v", ref, hdr, a.Header())
	}
	if !bytes.Equal(got, a.Bytes) {
		t.Fatalf("Fetch(%s) returned %d bytes that differ from the %d put", ref, len(got), len(a.Bytes))
	}
	checkStat(t, b, ref, a.Header())
}

func checkStat(t *testing.T, b Backend, ref asl.Reference, want asl.Header) asl.Info {
	t.Helper()
	info, err := b.Stat(t.Context(), ref)
	if err != nil {
		t.Fatalf("Stat(%s): %v", ref, err)
	}
	checkInfo(t, "Stat", info, ref, want)
	return info
}

// checkInfo checks the fields of an Info (SPECS.md §6.1).
func checkInfo(t *testing.T, what string, info asl.Info, ref asl.Reference, want asl.Header) {
	t.Helper()
	if info.Ref != ref {
		t.Errorf("%s(%s).Ref = %s", what, ref, info.Ref)
	}
	if info.Header != want {
		t.Errorf("%s(%s) header = %+v, want %+v", what, ref, info.Header, want)
	}
	if info.StoredSize < -1 {
		t.Errorf("%s(%s).StoredSize = %d, want >= 0 or -1 (unknown)", what, ref, info.StoredSize)
	}
	switch info.Compression {
	case "none", "zstd", "mixed":
	case "":
		if info.StoredSize != -1 {
			t.Errorf("%s(%s).Compression is empty while StoredSize = %d is known", what, ref, info.StoredSize)
		}
	default:
		t.Errorf("%s(%s).Compression = %q, want none, zstd or mixed", what, ref, info.Compression)
	}
	if info.Compression == "none" && info.StoredSize >= 0 && uint64(info.StoredSize) != want.Size {
		t.Errorf("%s(%s): uncompressed, yet StoredSize = %d for %d bytes", what, ref, info.StoredSize, want.Size)
	}
}

// put stores a through PutArtifact and checks its reference (SPECS.md
// §5.1).
func put(t *testing.T, b Backend, id asl.HashID, a asl.Artifact) asl.Reference {
	t.Helper()
	ref, err := asl.PutArtifact(t.Context(), b, id, a)
	if err != nil {
		t.Fatalf("Put(%d bytes): %v", len(a.Bytes), err)
	}
	if want := asl.MustDerive(id, a); ref != want {
		t.Fatalf("Put(%d bytes) = %s, want %s", len(a.Bytes), ref, want)
	}
	return ref
}

// list enumerates everything.
func list(t *testing.T, b Backend) []asl.Info {
	t.Helper()
	var out []asl.Info
	if err := b.Enumerate(t.Context(), asl.Reference{}, func(in asl.Info) error {
		out = append(out, in)
		return nil
	}); err != nil {
		t.Fatalf("Enumerate: %v", err)
	}
	return out
}

// checkEmpty asserts that nothing is visible in the store.
func checkEmpty(t *testing.T, b Backend, why string) {
	t.Helper()
	if got := list(t, b); len(got) != 0 {
		t.Fatalf("%s: Enumerate lists %d artifacts (first %s), want none", why, len(got), got[0].Ref)
	}
}

// checkAbsent asserts that Stat and Fetch of ref say ErrNotFound.
func checkAbsent(t *testing.T, b Backend, ref asl.Reference, why string) {
	t.Helper()
	if _, err := b.Stat(t.Context(), ref); !errors.Is(err, asl.ErrNotFound) {
		t.Errorf("%s: Stat(%s) = %v, want ErrNotFound", why, ref, err)
	}
	if rc, _, err := b.Fetch(t.Context(), ref); !errors.Is(err, asl.ErrNotFound) {
		if err == nil {
			rc.Close()
		}
		t.Errorf("%s: Fetch(%s) = %v, want ErrNotFound", why, ref, err)
	}
}

// absentOrWhole asserts that ref is either not stored or stored intact.
func absentOrWhole(t *testing.T, b Backend, ref asl.Reference, a asl.Artifact) bool {
	t.Helper()
	_, err := b.Stat(t.Context(), ref)
	if errors.Is(err, asl.ErrNotFound) {
		return false
	}
	if err != nil {
		t.Fatalf("Stat(%s): %v", ref, err)
	}
	checkStored(t, b, ref, a)
	return true
}

var errStop = errors.New("storetest: stop")

var errReader = errors.New("storetest: reader failed")

// failingReader yields n bytes of data, then fails with errReader.
type failingReader struct {
	data []byte
}

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, errReader
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

// cancelingReader yields data and calls cancel once at byte at.
type cancelingReader struct {
	data   []byte
	off    int
	at     int
	cancel context.CancelFunc
}

func (c *cancelingReader) Read(p []byte) (int, error) {
	if c.off >= len(c.data) {
		return 0, io.EOF
	}
	if c.off >= c.at && c.cancel != nil {
		c.cancel()
		c.cancel = nil
	}
	n := copy(p, c.data[c.off:])
	c.off += n
	return n, nil
}
