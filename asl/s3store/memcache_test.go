package s3store

import (
	"bytes"
	"testing"

	"github.com/amduat/amduat/asl"
)

// TestMemCacheBound: the memory cache keeps at most max bytes, least
// recently used out first, refuses payloads above memItemMax or a quarter
// of max, and returns what was added.
func TestMemCacheBound(t *testing.T) {
	c := newMemCache(4 << 10)
	art := func(i byte, n int) (asl.Reference, asl.Header, []byte) {
		a := asl.Untagged(bytes.Repeat([]byte{i}, n))
		return asl.MustDerive(asl.HashSHA256, a), a.Header(), a.Bytes
	}
	var refs []asl.Reference
	for i := range byte(5) {
		ref, hdr, b := art(i, 1000)
		c.add(ref, hdr, b)
		refs = append(refs, ref)
		if i == 1 {
			c.get(refs[0]) // 0 used again: 1 is now the oldest
		}
	}
	for i, want := range []bool{true, false, true, true, true} {
		b, hdr, ok := c.get(refs[i])
		if ok != want {
			t.Errorf("artifact %d kept = %v, want %v", i, ok, want)
		}
		if ok && (hdr.Size != 1000 || !bytes.Equal(b, bytes.Repeat([]byte{byte(i)}, 1000))) {
			t.Errorf("artifact %d: %d bytes, header %+v", i, len(b), hdr)
		}
	}
	if c.total > c.max {
		t.Errorf("total %d above max %d", c.total, c.max)
	}
	big, hdr, b := art(9, 1025) // above a quarter of max
	c.add(big, hdr, b)
	if _, _, ok := c.get(big); ok {
		t.Error("a payload above a quarter of the cache was kept")
	}
	c = newMemCache(1 << 30)
	big, hdr, b = art(9, memItemMax+1)
	c.add(big, hdr, b)
	if _, _, ok := c.get(big); ok {
		t.Error("a payload above memItemMax was kept")
	}
}
