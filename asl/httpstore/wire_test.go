package httpstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	"github.com/amduat/amduat/asl"
)

// TestReadFramesLarge: frames above the allocation step round-trip, and a
// body that claims a large frame but ends early costs memory in proportion
// to what it sent, not to its claim (DESIGN: limits are checked before
// memory is spent).
func TestReadFramesLarge(t *testing.T) {
	// Sequential: it reads the process's allocation total (runtime.MemStats).
	big := asl.Tagged(5, bytes.Repeat([]byte{0xab, 0xcd, 0xef}, 1<<20+7))
	arts := []asl.Artifact{asl.Untagged([]byte("a")), big, asl.Untagged(nil)}
	var body []byte
	for _, a := range arts {
		body = AppendFrame(body, a)
	}
	got, err := ReadFrames(bytes.NewReader(body), 10, 1<<30)
	if err != nil || len(got) != 3 || !bytes.Equal(got[1].Bytes, big.Bytes) || got[1].Header() != big.Header() {
		t.Fatalf("ReadFrames = %d artifacts, %v", len(got), err)
	}
	if _, err := ReadFrames(bytes.NewReader(body[:len(body)-20]), 10, 1<<30); !errors.Is(err, ErrFrame) {
		t.Fatalf("ReadFrames(truncated) = %v, want ErrFrame", err)
	}

	claim := binary.BigEndian.AppendUint32(nil, 1<<30)
	claim = append(claim, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = ReadFrames(bytes.NewReader(claim), 10, 1<<31)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrFrame) {
		t.Fatalf("ReadFrames(short body claiming 1 GiB) = %v, want ErrFrame", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 8<<20 {
		t.Errorf("a 14-byte body claiming a 1 GiB frame allocated %d bytes", n)
	}
}
