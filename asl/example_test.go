package asl_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/memstore"
)

// A Reference is derived from the artifact's canonical encoding; equal
// artifacts give equal references, comparable with ==.
func ExampleDerive() {
	a := asl.Untagged([]byte("hello"))
	ref := asl.MustDerive(asl.HashSHA256, a)
	fmt.Println(ref)
	fmt.Printf("%x\n", asl.EncodeArtifact(a))
	back, _ := asl.ParseReference(ref.String())
	fmt.Println(back == ref)
	// Output:
	// 00011f1d4ea728bc4c10bbc8211c7644aa950b6296c9b3e70d263e4ae6fc83e895e4
	// 00000000000000000568656c6c6f
	// true
}

// Put and get through the store interfaces; every backend behaves alike.
func ExamplePutArtifact() {
	ctx := context.Background()
	var s asl.Store = memstore.New()
	ref, err := asl.PutArtifact(ctx, s, asl.HashSHA256, asl.Tagged(0x101, []byte("hi")))
	if err != nil {
		panic(err)
	}
	a, err := asl.Get(ctx, s, ref, 0)
	if err != nil {
		panic(err)
	}
	fmt.Println(ref)
	fmt.Printf("%s tag=%s\n", a.Bytes, a.Header().TagString())
	// Output:
	// 000157ea0c5cba3742c69ca28b67b4dd2696b33d2111b98c8490436259c8808f6f23
	// hi tag=0x00000101
}

// Stream a large artifact in and out: the size is given up front, the
// payload is read and hashed in one pass, and the read side is verified.
func ExampleReceiver_stream() {
	ctx := context.Background()
	s := memstore.New()
	const size = 8 << 20
	payload := io.LimitReader(zeros{}, size)
	ref, err := s.Put(ctx, asl.HashSHA256, asl.Header{Size: size}, payload)
	if err != nil {
		panic(err)
	}
	rc, hdr, err := s.Fetch(ctx, ref)
	if err != nil {
		panic(err)
	}
	defer rc.Close()
	h := sha256.New()
	h.Write(hdr.AppendHeader(nil))
	n, err := io.Copy(h, rc)
	fmt.Println(n, err, bytes.Equal(h.Sum(nil), ref.Digest()))
	// Output: 8388608 <nil> true
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }
