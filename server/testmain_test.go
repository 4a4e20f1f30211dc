package server_test

import (
	"testing"

	"github.com/amduat/amduat/internal/browsertest"
	"github.com/amduat/amduat/internal/testexit"
)

// TestMain ends the Chromium the browser tests share (browsertest.Shared)
// and exits without the race runtime's pause (internal/testexit).
func TestMain(m *testing.M) {
	code := m.Run()
	browsertest.Close()
	testexit.Exit(code)
}
