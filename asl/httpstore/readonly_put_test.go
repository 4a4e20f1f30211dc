package httpstore_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/server"
)

// TestReadTokenPutOfStoredArtifacts (SPECS.md §18.9): a batch put asks
// missing (scope read) first, so with a read-only token it succeeds when
// the server holds every artifact already (nothing is written), and is
// refused with 403 as soon as one artifact has to be uploaded.
func TestReadTokenPutOfStoredArtifacts(t *testing.T) {
	t.Parallel()
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	readTok, err := server.AddToken(tokens, "reader", []string{"read"})
	if err != nil {
		t.Fatal(err)
	}
	auth, err := server.LoadAuth(tokens)
	if err != nil {
		t.Fatal(err)
	}
	st := mem{memstore.New()}
	stored := asl.Untagged([]byte("already there"))
	if _, err := asl.PutArtifact(t.Context(), st, asl.HashSHA256, stored); err != nil {
		t.Fatal(err)
	}
	s, err := server.New(server.Config{Store: st, Auth: auth})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	reader, err := httpstore.Open(t.Context(), ts.URL, httpstore.Options{Token: readTok})
	if err != nil {
		t.Fatal(err)
	}
	refs, err := reader.PutBatch(t.Context(), asl.HashSHA256, []asl.Artifact{stored, stored})
	if err != nil || len(refs) != 2 || refs[0] != asl.MustDerive(asl.HashSHA256, stored) {
		t.Fatalf("PutBatch of stored artifacts with a read token = %v, %v; want their references", refs, err)
	}
	_, err = reader.PutBatch(t.Context(), asl.HashSHA256, []asl.Artifact{stored, asl.Untagged([]byte("new"))})
	var he *httpstore.Error
	if !errors.As(err, &he) || he.Status != http.StatusForbidden {
		t.Fatalf("PutBatch of a new artifact with a read token = %v, want 403", err)
	}
}
