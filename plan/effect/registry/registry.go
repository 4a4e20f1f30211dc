// Package registry assembles the executors a policy allows (SPECS.md §23):
// the built-in http and exec effects and one external executor per entry
// of the policy's executors list. The CLI and the server call Executors
// once per policy; external executors start their process at their first
// call, and Close stops them.
package registry

import (
	"errors"
	"io"

	"github.com/amduat/amduat/plan/effect"
	"github.com/amduat/amduat/plan/effect/execfx"
	"github.com/amduat/amduat/plan/effect/extfx"
	"github.com/amduat/amduat/plan/effect/httpfx"
	"github.com/amduat/amduat/plan/effect/policy"
)

// Executors returns http, exec and every external executor of p, in that
// order (external ones in the policy's order). Every executor enforces p
// itself: http and exec refuse hosts and commands p does not list.
func Executors(p *policy.Policy) ([]effect.Executor, error) {
	if p == nil {
		return nil, errors.New("registry: no policy (use policy.Empty() to allow nothing)")
	}
	xs := []effect.Executor{httpfx.New(p), execfx.New(p)}
	for _, cfg := range p.Executors {
		xs = append(xs, extfx.New(cfg))
	}
	return xs, nil
}

// Close stops every executor that holds a process (the external ones).
func Close(xs []effect.Executor) error {
	var errs []error
	for _, x := range xs {
		if c, ok := x.(io.Closer); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}
