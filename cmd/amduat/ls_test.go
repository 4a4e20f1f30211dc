package main

import (
	"testing"

	"github.com/amduat/amduat/asl"
)

func TestAppendStatLineMatchesStatLine(t *testing.T) {
	for _, in := range []asl.Info{
		{Ref: asl.MustDerive(asl.HashSHA256, asl.Untagged(nil)), Header: asl.Header{Size: 0}, StoredSize: 0, Compression: "none"},
		{Ref: asl.MustDerive(asl.HashBLAKE3, asl.Untagged(nil)), Header: asl.Header{Size: 1 << 40, HasTag: true, Tag: 0xdeadbeef}, StoredSize: -1, Compression: "mixed"},
		{Ref: asl.MustDerive(asl.HashSHA256, asl.Tagged(0, nil)), Header: asl.Header{HasTag: true}, StoredSize: 7, Compression: "zstd"},
	} {
		if got, want := string(appendStatLine(nil, in)), statLine(in)+"\n"; got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}
