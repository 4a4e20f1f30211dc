package guest

import (
	"errors"
	"fmt"
	"testing"
)

func TestErrorCode(t *testing.T) {
	tests := []struct {
		name string
		err  error
		code uint16
		msg  string
	}{
		{"fail", Fail(7, "bad %s", "input"), 7, "bad input"},
		{"fail zero code", Fail(0, "x"), 1, "x"},
		{"literal zero code", &Error{Message: "y"}, 1, "y"},
		{"plain error", errors.New("boom"), CodeError, "boom"},
		{"wrapped Error keeps its code", fmt.Errorf("w: %w", Fail(9, "z")), 9, "w: operation failed with code 9: z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, msg := errorCode(tt.err)
			if code != tt.code || msg != tt.msg {
				t.Fatalf("errorCode = %d %q, want %d %q", code, msg, tt.code, tt.msg)
			}
		})
	}
}
