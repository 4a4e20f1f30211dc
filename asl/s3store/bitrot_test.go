package s3store_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
)

// TestBitrot: bytes flipped in MinIO's own data files (its bitrot) read as
// ERR_INTEGRITY naming the object, never as an I/O error and never as
// wrong bytes (issue 20).
func TestBitrot(t *testing.T) {
	t.Parallel()
	m := sharedServer(t)
	st := create(t, m, "bitrot", options(m))
	ctx := t.Context()
	arts := []asl.Artifact{
		asl.Untagged(gen(1, 1000)),    // inlined in MinIO's xl.meta
		asl.Untagged(gen(2, 300<<10)), // a part file
		asl.Untagged(gen(3, 3<<20)),   // a part file, several blocks
	}
	refs := make([]asl.Reference, len(arts))
	for i, a := range arts {
		ref, err := asl.PutArtifact(ctx, st, asl.HashSHA256, a)
		if err != nil {
			t.Fatal(err)
		}
		refs[i] = ref
	}
	for i, ref := range refs {
		dir := filepath.Join(m.DataDir(), "bitrot", st.ArtifactKey(ref))
		var files []string
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files = append(files, p)
			}
			return nil
		})
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasSuffix(f, "xl.meta") && len(files) > 1 {
				continue
			}
			at := len(b) - len(b)/3
			b[at] ^= 0x20
			if err := os.WriteFile(f, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := asl.Get(ctx, st, ref, 0)
		t.Logf("artifact %d: err %v", i, err)
		if err == nil && !bytes.Equal(got.Bytes, arts[i].Bytes) {
			t.Fatalf("artifact %d: wrong bytes", i)
		}
		if !errors.Is(err, asl.ErrIntegrity) {
			t.Errorf("artifact %d: %v, want ERR_INTEGRITY", i, err)
		}
	}
}
