package memstore_test

import (
	"testing"

	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/asl/storetest"
)

// TestStoreSuite runs the shared backend suite (asl/storetest).
func TestStoreSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Backend { return memstore.New() })
}
