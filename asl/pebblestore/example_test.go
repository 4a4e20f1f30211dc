package pebblestore_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
)

// Example_putGet creates a store, puts an artifact and reads it back.
func Example_putGet() {
	dir, err := os.MkdirTemp("", "amduat-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := pebblestore.Create(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	ctx := context.Background()
	ref, err := asl.PutArtifact(ctx, s, s.DefaultHash(), asl.Untagged([]byte("hello")))
	if err != nil {
		log.Fatal(err)
	}
	a, err := asl.Get(ctx, s, ref, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ref)
	fmt.Printf("%s\n", a.Bytes)
	// Output:
	// 00011f1d4ea728bc4c10bbc8211c7644aa950b6296c9b3e70d263e4ae6fc83e895e4
	// hello
}

// repeatReader yields n bytes cycling through a pattern, without holding
// them all.
type repeatReader struct {
	pattern []byte
	off, n  int64
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.off == r.n {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.n-r.off)]
	for i := 0; i < len(p); {
		i += copy(p[i:], r.pattern[(r.off+int64(i))%int64(len(r.pattern)):])
	}
	r.off += int64(len(p))
	return len(p), nil
}

// Example_stream streams a 4 MiB artifact (16 chunks) through Put and Fetch; memory
// stays at a few chunks whatever the size.
func Example_stream() {
	dir, err := os.MkdirTemp("", "amduat-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := pebblestore.Create(dir, &pebblestore.Options{DefaultHash: asl.HashBLAKE3})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	ctx := context.Background()
	const size = 4 << 20
	hdr := asl.Header{Size: size, Tag: 0x00001234, HasTag: true}
	ref, err := s.Put(ctx, s.DefaultHash(), hdr, &repeatReader{pattern: []byte("amduat "), n: size})
	if err != nil {
		log.Fatal(err)
	}
	rc, got, err := s.Fetch(ctx, ref)
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	var head bytes.Buffer
	n, err := io.Copy(io.MultiWriter(io.Discard, limitWriter(&head, 13)), rc)
	if err != nil {
		log.Fatal(err)
	}
	info, err := s.Stat(ctx, ref)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ref)
	fmt.Println(n, got.TagString(), head.String())
	fmt.Println(info.Compression, info.StoredSize < size/100)
	// Output:
	// 80016a42ec7b6570591ea0c011a982c1c7cf69e44c5a86299a751146d89888a4e123
	// 4194304 0x00001234 amduat amduat
	// zstd true
}

type limited struct {
	w    io.Writer
	left int
}

func limitWriter(w io.Writer, n int) io.Writer { return &limited{w, n} }

func (l *limited) Write(p []byte) (int, error) {
	if l.left > 0 {
		k := min(l.left, len(p))
		l.w.Write(p[:k])
		l.left -= k
	}
	return len(p), nil
}
