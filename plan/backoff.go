package plan

import (
	"crypto/sha256"
	"encoding/binary"
	"math/bits"
	"time"

	"github.com/amduat/amduat/plan/effect"
)

// ClassLimit is what one retryable error class allows at most, whatever a
// step's retry policy says (seed 004 §7.5.2, SPECS.md §24.5).
type ClassLimit struct {
	MaxAttempts uint32
	Cap         time.Duration
}

// ClassLimits are the per-class bounds. A class absent here is final and
// never retried.
var ClassLimits = map[effect.ErrorClass]ClassLimit{
	effect.NetworkTimeout:        {MaxAttempts: 3, Cap: 30 * time.Second},
	effect.RateLimited:           {MaxAttempts: 5, Cap: 2 * time.Minute},
	effect.ProviderUnavailable:   {MaxAttempts: 3, Cap: 30 * time.Second},
	effect.DependencyUnavailable: {MaxAttempts: 3, Cap: 30 * time.Second},
}

// defaultBase is the first backoff when a policy's BaseMillis is zero.
const defaultBase = time.Second

// Backoff says whether a step whose attempt number attempt (from 1) failed
// with class may be tried again, and how long to wait first (SPECS.md
// §24.5). A final class, or an attempt that used the last of
// min(policy.MaxAttempts, the class's MaxAttempts), is never retried.
//
// The wait is exponential with "equal jitter" derived from the key, not
// from a random source, so that a schedule replays:
//
//	exp   = min(base << (attempt-1), cap)        cap = min(policy cap, class cap)
//	u     = first 8 bytes, big-endian, of SHA-256("amduat-plan-backoff/1" 0x00 ‖ u32 len(key) ‖ key ‖ u32 attempt ‖ u8 class)
//	delay = (exp - floor(exp/2)) + floor(floor(exp/2) · u / 2^64)   (whole milliseconds)
//
// A provider's Retry-After raises the delay to at least its value, still
// within cap.
func Backoff(key string, attempt uint32, class effect.ErrorClass, p RetryPolicy, retryAfter time.Duration) (time.Duration, bool) {
	lim, ok := ClassLimits[class]
	if !ok || !class.Retryable() {
		return 0, false
	}
	maxAttempts := lim.MaxAttempts
	if p.MaxAttempts < maxAttempts {
		maxAttempts = p.MaxAttempts
	}
	if attempt >= maxAttempts {
		return 0, false
	}
	capD := lim.Cap
	if p.CapMillis > 0 && time.Duration(p.CapMillis)*time.Millisecond < capD {
		capD = time.Duration(p.CapMillis) * time.Millisecond
	}
	capMs := uint64(capD / time.Millisecond)
	base := uint64(p.BaseMillis)
	if base == 0 {
		base = uint64(defaultBase / time.Millisecond)
	}
	exp := base
	for i := uint32(1); i < attempt && exp < capMs; i++ {
		exp <<= 1
	}
	if exp > capMs {
		exp = capMs
	}
	h := sha256.New()
	h.Write([]byte("amduat-plan-backoff/1\x00"))
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(len(key)))
	h.Write(b[:])
	h.Write([]byte(key))
	binary.BigEndian.PutUint32(b[:], attempt)
	h.Write(b[:])
	h.Write([]byte{byte(class)})
	u := binary.BigEndian.Uint64(h.Sum(nil)[:8])
	half := exp / 2
	jit, _ := bits.Mul64(half, u) // floor(half · u / 2^64)
	delay := exp - half + jit
	if ra := uint64(retryAfter / time.Millisecond); ra > delay {
		delay = min(ra, capMs)
	}
	return time.Duration(delay) * time.Millisecond, true
}
