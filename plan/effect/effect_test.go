package effect

import (
	"errors"
	"fmt"
	"testing"
)

func TestUnknownOutcome(t *testing.T) {
	err := fmt.Errorf("call: %w", Unknown(NetworkTimeout, "no answer"))
	var ue *UnknownError
	if !IsUnknownOutcome(err) || !errors.As(err, &ue) || ue.Class != NetworkTimeout {
		t.Fatalf("%v: want an unknown outcome naming network_timeout", err)
	}
	var e *Error
	if errors.As(err, &e) {
		t.Fatal("an unknown outcome must not be an *Error, or a plan would retry it by class")
	}
	if got := err.Error(); got != "call: unknown outcome: network_timeout: no answer" {
		t.Fatalf("message %q", got)
	}
	if IsUnknownOutcome(&Error{Class: ProviderUnavailable}) {
		t.Fatal("a classified error is not an unknown outcome")
	}
}

func TestClassNames(t *testing.T) {
	for c, want := range map[ErrorClass]string{
		NetworkTimeout: "network_timeout", RateLimited: "rate_limited", ProviderUnavailable: "provider_unavailable",
		DependencyUnavailable: "dependency_unavailable", PolicyDenied: "policy_denied", InvalidInput: "invalid_input",
		AuthForbidden: "auth_forbidden", LimitExceeded: "limit_exceeded", ExecutorFault: "executor_fault",
	} {
		if c.String() != want || c.Retryable() != (c < 16) {
			t.Errorf("%d: %q retryable %v", c, c.String(), c.Retryable())
		}
	}
}
