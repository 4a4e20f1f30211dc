package main

import (
	"bytes"
	"testing"
)

func TestEncode(t *testing.T) {
	tests := []struct {
		format string
		want   []byte
		ok     bool
	}{
		{"", []byte("258\n"), true},
		{"decimal", []byte("258\n"), true},
		{"u64le", []byte{2, 1, 0, 0, 0, 0, 0, 0}, true},
		{"u64be", []byte{0, 0, 0, 0, 0, 0, 1, 2}, true},
		{"hex", nil, false},
	}
	for _, tt := range tests {
		got, err := encode(258, tt.format)
		if (err == nil) != tt.ok || !bytes.Equal(got, tt.want) {
			t.Errorf("encode(258, %q) = %v, %v; want %v ok=%v", tt.format, got, err, tt.want, tt.ok)
		}
	}
}
