package s3store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/s3store"
)

// TestStrayArtifactKeys (SPECS.md §6.7): an object under a/ whose key is
// not the artifact key of a reference is skipped by enumerate, which lists
// every real artifact and then fails with ERR_INTEGRITY naming the key.
func TestStrayArtifactKeys(t *testing.T) {
	t.Parallel()
	m := sharedServer(t)
	st := create(t, m, "stray", options(m))
	ref, err := asl.PutArtifact(t.Context(), st, asl.HashSHA256, asl.Untagged([]byte("real")))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a/junk", "a/0001/1f/nothex", "a/0001/00/" + ref.String()} {
		putObject(t, st, st.Prefix()+k, []byte("x"))
	}
	var seen []asl.Reference
	err = st.Enumerate(t.Context(), asl.Reference{}, func(in asl.Info) error { seen = append(seen, in.Ref); return nil })
	if len(seen) != 1 || seen[0] != ref {
		t.Errorf("enumerate listed %v, want just %s", seen, ref)
	}
	if !errors.Is(err, asl.ErrIntegrity) || !strings.Contains(err.Error(), "a/junk") || !strings.Contains(err.Error(), "3 damaged objects") {
		t.Errorf("enumerate = %v, want ErrIntegrity naming the 3 stray keys", err)
	}
}

// TestConfigUnsupported (SPECS.md §6.7): a config naming an unregistered
// hash, or a layout version above the one this release writes, is ERR_UNSUPPORTED (a
// malformed config is ERR_INTEGRITY: TestConfigRejects).
func TestConfigUnsupported(t *testing.T) {
	t.Parallel()
	m := sharedServer(t)
	o := options(m)
	st := create(t, m, "config-unsupported", o)
	for _, c := range []string{`{"format":"amduat-s3store","version":2,"hash":30583}`, `{"format":"amduat-s3store","version":5,"hash":1}`} {
		putObject(t, st, st.Prefix()+"config", []byte(c))
		st2, err := s3store.Open(t.Context(), st.Bucket(), st.Prefix(), o)
		if err == nil {
			st2.Close()
		}
		if !errors.Is(err, asl.ErrUnsupported) || errors.Is(err, asl.ErrIntegrity) {
			t.Errorf("config %s: open = %v, want ErrUnsupported", c, err)
		}
	}
}
