package bundle_test

import (
	"context"
	"io"
	"runtime"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/bundle"
	"github.com/amduat/amduat/internal/longtest"
)

// pattern yields n deterministic bytes without holding them.
type pattern struct{ left, i uint64 }

func (p *pattern) Read(b []byte) (int, error) {
	if p.left == 0 {
		return 0, io.EOF
	}
	if uint64(len(b)) > p.left {
		b = b[:p.left]
	}
	for k := range b {
		b[k] = byte(p.i*7 + p.i>>9)
		p.i++
	}
	p.left -= uint64(len(b))
	return len(b), nil
}

// sinkStore checks what it receives and keeps nothing.
type sinkStore struct{ got []asl.Reference }

func (s *sinkStore) Put(_ context.Context, id asl.HashID, hdr asl.Header, r io.Reader) (asl.Reference, error) {
	h, err := asl.NewHasher(id, hdr)
	if err != nil {
		return asl.Reference{}, err
	}
	if _, err := io.Copy(h, r); err != nil {
		return asl.Reference{}, err
	}
	ref, err := h.Sum()
	s.got = append(s.got, ref)
	return ref, err
}

func (s *sinkStore) PutBatch(ctx context.Context, id asl.HashID, arts []asl.Artifact) ([]asl.Reference, error) {
	var refs []asl.Reference
	for _, a := range arts {
		r, err := asl.Derive(id, a)
		if err != nil {
			return nil, err
		}
		refs = append(refs, r)
	}
	s.got = append(s.got, refs...)
	return refs, nil
}

// A 32 MiB artifact (128 MiB with AMDUAT_LONG=1, internal/longtest) goes
// writer -> pipe -> reader -> store with a few buffers of memory, not its
// size: the run allocates less than a sixteenth of it.
func TestStreamingBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("hashes 64 MiB")
	}
	size := uint64(longtest.Logf(t, "artifact MiB", 32, 128)) << 20
	hdr := asl.Header{Size: size, HasTag: true, Tag: 9}
	h, _ := asl.NewHasher(asl.HashSHA256, hdr)
	io.Copy(h, &pattern{left: size})
	ref, _ := h.Sum()

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	pr, pw := io.Pipe()
	go func() {
		w, err := bundle.NewWriter(pw)
		if err == nil {
			err = w.Add(ref, hdr, &pattern{left: size})
		}
		if err == nil {
			err = w.Close([]asl.Reference{ref})
		}
		pw.CloseWithError(err)
	}()
	sink := &sinkStore{}
	st, err := bundle.Import(context.Background(), sink, pr, bundle.ImportOptions{})
	runtime.ReadMemStats(&after)
	if err != nil || st.Stored != 1 || len(sink.got) != 1 || sink.got[0] != ref || st.Roots[0] != ref {
		t.Fatalf("import: %+v %v", st, err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/16 {
		t.Fatalf("export and import of a %d-byte artifact allocated %d bytes", size, alloc)
	}
	t.Logf("allocated %d KiB for a %d MiB artifact", (after.TotalAlloc-before.TotalAlloc)>>10, size>>20)
}
