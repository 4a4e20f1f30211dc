package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/pel"
)

// countingStore records how the putter used the store.
type countingStore struct {
	*memstore.Store
	calls []string // "batch:N" or "put:SIZE"
}

func (c *countingStore) PutBatch(ctx context.Context, id asl.HashID, arts []asl.Artifact) ([]asl.Reference, error) {
	c.calls = append(c.calls, "batch:"+strconv.Itoa(len(arts)))
	return c.Store.PutBatch(ctx, id, arts)
}

func (c *countingStore) Put(ctx context.Context, id asl.HashID, hdr asl.Header, r io.Reader) (asl.Reference, error) {
	c.calls = append(c.calls, "put:"+strconv.Itoa(int(hdr.Size)))
	return c.Store.Put(ctx, id, hdr, r)
}

// The putter batches small inputs (bounded by bytes and count), streams
// large ones individually, flushes before a stream so output stays in
// input order, and spools large non-file input.
func TestPutterBatchingAndOrder(t *testing.T) {
	dir := t.TempDir()
	sizes := []int{3, 4, 0, 5, 20, 2, 2, 2, 2, 9}
	var paths []string
	var want []asl.Reference
	for i, n := range sizes {
		p := filepath.Join(dir, "f"+strconv.Itoa(i))
		data := bytes.Repeat([]byte{byte('a' + i)}, n)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
		want = append(want, asl.MustDerive(asl.HashBLAKE3, asl.Tagged(7, data)))
	}
	stdinData := bytes.Repeat([]byte("s"), 30)
	paths = append(paths[:3], append([]string{"-"}, paths[3:]...)...)
	want = append(want[:3], append([]asl.Reference{asl.MustDerive(asl.HashBLAKE3, asl.Tagged(7, stdinData))}, want[3:]...)...)

	cs := &countingStore{Store: memstore.New()}
	var got []asl.Reference
	var streamed []bool
	p := &putter{store: cs, hash: asl.HashBLAKE3, hasTag: true, tag: 7,
		stdin:      bytes.NewReader(stdinData), // not an *os.File: size unknown
		batchBytes: 10, batchCount: 3, streamAbove: 8,
		emit: func(it putItem) error {
			got = append(got, it.Ref)
			streamed = append(streamed, it.Streamed)
			if it.TypeTag == nil || *it.TypeTag != 7 {
				t.Errorf("%s: type tag %v", it.Source, it.TypeTag)
			}
			return nil
		}}
	for _, src := range paths {
		if err := p.add(context.Background(), src); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d refs for %d inputs", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("input %d (%s): ref %s, want %s", i, paths[i], got[i], want[i])
		}
	}
	// Inputs in order: 3 4 0 | stdin 30 (spooled, streamed) | 5 | 20 (streamed) | 2 2 2 | 2 9 (streamed).
	wantCalls := "batch:3 put:30 batch:1 put:20 batch:3 batch:1 put:9"
	if strings.Join(cs.calls, " ") != wantCalls {
		t.Fatalf("store calls %v, want %s", cs.calls, wantCalls)
	}
	if p.batches != 4 || p.streamed != 3 {
		t.Fatalf("batches %d streamed %d", p.batches, p.streamed)
	}
}

func TestPutterErrors(t *testing.T) {
	dir := t.TempDir()
	p := &putter{store: memstore.New(), hash: asl.HashSHA256, emit: func(putItem) error { return nil }}
	err := p.add(context.Background(), filepath.Join(dir, "missing"))
	var ce *cliError
	if !errors.As(err, &ce) || ce.code != exitIO || !strings.Contains(err.Error(), "missing: open: no such file") {
		t.Fatalf("missing file: %v", err)
	}
	err = p.add(context.Background(), dir)
	if !errors.As(err, &ce) || ce.code != exitUsage || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("directory: %v", err)
	}
	// An unregistered hash fails as unsupported at flush.
	p = &putter{store: memstore.New(), hash: 0x7777, emit: func(putItem) error { return nil }}
	os.WriteFile(filepath.Join(dir, "x"), []byte("x"), 0o644)
	if err := p.add(context.Background(), filepath.Join(dir, "x")); err != nil {
		t.Fatal(err)
	}
	if err := p.flush(context.Background()); classify(err) != exitUnsupported {
		t.Fatalf("unknown hash: %v (code %d)", err, classify(err))
	}
}

func TestParseTypeTag(t *testing.T) {
	good := map[string]asl.TypeTag{"0": 0, "257": 257, "0x101": 0x101, "0X00000101": 0x101, "010": 10, "4294967295": 0xffffffff, "0xffffffff": 0xffffffff}
	for in, want := range good {
		if got, err := parseTypeTag(in); err != nil || got != want {
			t.Errorf("parseTypeTag(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0x", "-1", "+1", "4294967296", "0x100000000", "1_000", "abc", "0b1", " 1"} {
		if got, err := parseTypeTag(in); err == nil {
			t.Errorf("parseTypeTag(%q) = %v, want error", in, got)
		}
	}
}

func FuzzParseTypeTag(f *testing.F) {
	for _, s := range []string{"0", "0x101", "4294967295", "-1", "0x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tag, err := parseTypeTag(s)
		if err != nil {
			return
		}
		for _, form := range []string{strconv.Itoa(int(tag)), (&typeTagValue{set: true, tag: tag}).String()} {
			if back, err := parseTypeTag(form); err != nil || back != tag {
				t.Fatalf("%q -> %d -> %q -> %d, %v", s, tag, form, back, err)
			}
		}
	})
}

func TestClassify(t *testing.T) {
	for _, tt := range []struct {
		err  error
		code int
	}{
		{nil, exitOK},
		{errors.New("disk"), exitIO},
		{asl.ErrNotFound, exitNotFound},
		{asl.ErrIntegrity, exitIntegrity},
		{asl.ErrUnsupported, exitUnsupported},
		{context.Canceled, exitInterrupted},
		{fmt.Errorf("open store x: %w", pebblestore.ErrLocked), exitIO},
		{fmt.Errorf("put: %w", pebblestore.ErrNoSpace), exitIO},
		{fmt.Errorf("store x: %w", pebblestore.ErrReadOnly), exitIO},
		{pebblestore.ErrStale, exitIO},
		{pebblestore.ErrNoStore, exitStore},
		{fmt.Errorf("surface run: %w", &pel.InternalError{NodeID: 2, Value: "boom"}), exitInternal},
		{&httpstore.Error{Status: 500, Code: httpstore.CodeInternal}, exitInternal},
		{&httpstore.Error{Status: 500, Code: httpstore.CodeIO}, exitIO},
	} {
		if got := classify(tt.err); got != tt.code {
			t.Errorf("classify(%v) = %d, want %d", tt.err, got, tt.code)
		}
	}
}

// panicReader panics when read: it stands for a bug on the command's
// goroutine.
type panicReader struct{}

func (panicReader) Read([]byte) (int, error) { panic("reader bug") }

// TestPanicIsInternalFailure: a panic on the command's goroutine ends the
// command with exit 8 and one line, never the runtime's exit 2 (SPECS.md
// §16.2).
func TestPanicIsInternalFailure(t *testing.T) {
	dir := t.TempDir() + "/store"
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"init", "--store", dir}, nil, &out, &errb); code != exitOK {
		t.Fatalf("init: %d %s", code, errb.String())
	}
	errb.Reset()
	code := run(context.Background(), []string{"put", "--store", dir, "-"}, panicReader{}, &out, &errb)
	if code != exitInternal || !strings.Contains(errb.String(), "internal failure: reader bug") {
		t.Fatalf("code %d, stderr %q; want 8 and an internal-failure line", code, errb.String())
	}
}
