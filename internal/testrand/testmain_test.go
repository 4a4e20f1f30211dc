package testrand

import (
	"testing"

	"github.com/amduat/amduat/internal/testexit"
)

// TestMain exits without the race runtime's pause (internal/testexit).
func TestMain(m *testing.M) { testexit.Main(m) }
