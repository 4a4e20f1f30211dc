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

func TestHumanSize(t *testing.T) {
	for _, tc := range []struct {
		n    uint64
		want string
	}{
		{0, "0"}, {1023, "1023"}, {1024, "1.0K"}, {1025, "1.1K"}, {10 * 1024, "10K"},
		{10*1024 - 1, "10K"}, {1023 * 1024, "1023K"}, {1023*1024 + 1, "1.0M"},
		{3000000, "2.9M"}, {12 << 30, "12G"}, {1 << 60, "1.0E"}, {^uint64(0), "16E"},
	} {
		if got := humanSize(tc.n); got != tc.want {
			t.Errorf("humanSize(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
