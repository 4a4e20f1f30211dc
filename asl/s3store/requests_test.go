package s3store_test

import (
	"context"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/s3store"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
)

// TestRequestsPerOperation counts the object-store requests of the
// operations SPECS.md §6.7, "Requests per operation" lists, on a real
// MinIO: the counts are deterministic (unlike times), so each is compared
// with its exact figure, method by method. The program is one concat of
// two 1-byte inputs: one output, so a run stores 4 artifacts (output,
// result, trace, provenance edge) and 9 index entries (the trace's, 3 TGK
// "from" and 3 "to" entries, the action cache's, the run log's).
func TestRequestsPerOperation(t *testing.T) {
	t.Parallel()
	m := sharedServer(t)
	ctx := context.Background()
	o := options(m)
	o.MemCacheSize = s3store.DefaultMemCacheSize
	st := create(t, m, "reqs", o)
	prog, err := pel.ProgramArtifact(pel.Program{Nodes: []pel.Node{{ID: 1, Op: opreg.OpConcat,
		Inputs: []pel.DagInput{pel.External(0), pel.External(1)}, Params: []byte{}}}, Roots: []pel.RootRef{{NodeID: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	// fresh is a store opened afresh on the bucket: a second server.
	fresh := func(mem int64) *s3store.Store {
		o := options(m)
		o.MemCacheSize = mem
		s, err := s3store.Open(ctx, st.Bucket(), st.Prefix(), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	var refs []asl.Reference
	var req surf.Request
	inputs := func(a, b string) {
		var err error
		refs, err = st.PutBatch(ctx, asl.HashSHA256, []asl.Artifact{prog, asl.Untagged([]byte(a)), asl.Untagged([]byte(b))})
		if err != nil {
			t.Fatal(err)
		}
		req = surf.Request{ProgramRef: refs[0], InputRefs: refs[1:]}
	}
	run := func(s *s3store.Store, o surf.Options, hit bool) {
		t.Helper()
		r, err := surf.New(s, o).Run(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if r.CacheHit != hit {
			t.Fatalf("CacheHit = %v, want %v", r.CacheHit, hit)
		}
	}
	for _, c := range []struct {
		name  string
		store func() *s3store.Store  // opened before the count
		op    func(s *s3store.Store) // counted
		want  s3store.Stats
	}{
		// 3 conditional PUTs of new artifacts.
		{"put batch", nil, func(*s3store.Store) { inputs("a", "b") }, s3store.Stats{PUT: 3}},
		// Each PUT refused (412); one HEAD each finds the object the
		// same and younger than the touch age: nothing rewritten.
		{"re-put", nil, func(*s3store.Store) { inputs("a", "b") }, s3store.Stats{PUT: 3, HEAD: 3}},
		// Salt and action entry (both missing); nothing read of the
		// program and inputs (in the memory cache since their put); 4
		// artifact PUTs, then 9 entry PUTs.
		{"run, miss", nil, func(s *s3store.Store) { run(s, surf.Options{}, false) }, s3store.Stats{GET: 2, PUT: 13}},
		// Through another server: salt, entry, then result, trace and
		// output (the entry names them, §14.6 format 2); the run log's
		// entry.
		{"hit, second server", func() *s3store.Store { return fresh(0) },
			func(s *s3store.Store) { run(s, surf.Options{}, true) }, s3store.Stats{GET: 5, PUT: 1}},
		{"hit, second server with memory cache", func() *s3store.Store { return fresh(s3store.DefaultMemCacheSize) },
			func(s *s3store.Store) { run(s, surf.Options{}, true) }, s3store.Stats{GET: 5, PUT: 1}},
		// Through the server that ran it: salt and entry; result,
		// output and trace from memory.
		{"hit, same server", nil, func(s *s3store.Store) { run(s, surf.Options{}, true) }, s3store.Stats{GET: 2, PUT: 1}},
		// A fresh run without the cache (new inputs put first, not
		// counted): the salt, for the log; 4 artifacts; 8 entries.
		{"run, no cache", func() *s3store.Store { inputs("c", "d"); return st },
			func(s *s3store.Store) { run(s, surf.Options{NoCache: true}, false) }, s3store.Stats{GET: 1, PUT: 12}},
	} {
		s := st
		if c.store != nil {
			s = c.store()
		}
		before := s.Stats()
		c.op(s)
		if got := s.Stats().Sub(before); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
