package plan

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/amduat/amduat/plan/effect"
)

// backoffSchedule renders the schedules of SPECS.md §24.5 for a few keys,
// classes and policies: the vectors a port must reproduce.
func backoffSchedule() string {
	var b strings.Builder
	b.WriteString("# amduat plan backoff (SPECS.md §24.5): KEY CLASS max/base/cap ATTEMPT retry_after_ms -> delay_ms | final\n")
	policies := []RetryPolicy{{MaxAttempts: 10, BaseMillis: 1000, CapMillis: 0}, {MaxAttempts: 3, BaseMillis: 250, CapMillis: 4000}, {MaxAttempts: 1}}
	classes := []effect.ErrorClass{effect.NetworkTimeout, effect.RateLimited, effect.ProviderUnavailable, effect.DependencyUnavailable, effect.PolicyDenied, effect.InvalidInput, effect.AuthForbidden}
	for _, key := range []string{"", "k1", "gmail_send:out-42"} {
		for _, c := range classes {
			for _, p := range policies {
				for a := uint32(1); a <= 6; a++ {
					for _, ra := range []time.Duration{0, 7 * time.Second} {
						d, ok := Backoff(key, a, c, p, ra)
						res := "final"
						if ok {
							res = fmt.Sprint(d.Milliseconds())
						}
						fmt.Fprintf(&b, "%q %s %d/%d/%d %d %d -> %s\n", key, c, p.MaxAttempts, p.BaseMillis, p.CapMillis, a, ra.Milliseconds(), res)
					}
				}
			}
		}
	}
	return b.String()
}

func TestBackoffGolden(t *testing.T) {
	t.Parallel()
	checkGolden(t, "backoff.golden", backoffSchedule())
}

func TestBackoffRules(t *testing.T) {
	t.Parallel()
	p := RetryPolicy{MaxAttempts: 100, BaseMillis: 1000}
	for _, c := range []effect.ErrorClass{effect.PolicyDenied, effect.InvalidInput, effect.AuthForbidden, effect.LimitExceeded, effect.ExecutorFault} {
		if _, ok := Backoff("k", 1, c, p, 0); ok {
			t.Errorf("final class %s is retried", c)
		}
	}
	for c, lim := range ClassLimits {
		n := uint32(0)
		for a := uint32(1); ; a++ {
			d, ok := Backoff("k", a, c, p, 0)
			if !ok {
				break
			}
			n++
			if d <= 0 || d > lim.Cap {
				t.Errorf("%s attempt %d: delay %v outside (0, %v]", c, a, d, lim.Cap)
			}
			if d2, _ := Backoff("k", a, c, p, 0); d2 != d {
				t.Errorf("%s attempt %d: %v then %v", c, a, d, d2)
			}
		}
		if n+1 != lim.MaxAttempts {
			t.Errorf("%s: %d retries, want %d (max attempts %d)", c, n, lim.MaxAttempts-1, lim.MaxAttempts)
		}
	}
	// Jitter differs between keys, and stays in [exp/2, exp].
	d1, _ := Backoff("a", 2, effect.RateLimited, p, 0)
	d2, _ := Backoff("b", 2, effect.RateLimited, p, 0)
	if d1 == d2 {
		t.Errorf("keys a and b back off alike: %v", d1)
	}
	for _, d := range []time.Duration{d1, d2} {
		if d < time.Second || d > 2*time.Second {
			t.Errorf("attempt 2 with base 1s: %v outside [1s, 2s]", d)
		}
	}
	// Retry-After raises the delay, within the cap.
	if d, _ := Backoff("a", 1, effect.RateLimited, p, 90*time.Second); d != 90*time.Second {
		t.Errorf("Retry-After 90s: %v", d)
	}
	if d, _ := Backoff("a", 1, effect.RateLimited, p, time.Hour); d != 2*time.Minute {
		t.Errorf("Retry-After 1h: %v, want the 2m cap", d)
	}
}
