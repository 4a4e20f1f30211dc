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
		// One pack and its index object.
		{"put batch", nil, func(*s3store.Store) { inputs("a", "b") }, s3store.Stats{PUT: 2}},
		// Packed less than the touch age ago, by this process: nothing
		// sent.
		{"re-put", nil, func(*s3store.Store) { inputs("a", "b") }, s3store.Stats{}},
		// Salt and action entry (both missing): a listing of the index
		// objects written since for each (the lookups come one after the
		// other), and, once per process, whether loose entries of an
		// older layout exist; nothing read of the program and inputs (in
		// the memory cache since their put); the pack of the 4 artifacts,
		// then its index object with the 9 entries.
		{"run, miss", nil, func(s *s3store.Store) { run(s, surf.Options{}, false) }, s3store.Stats{LIST: 3, PUT: 2}},
		// Through another server: its first listing reads the 2 index
		// objects; the loose-entries check; the second lookup's listing;
		// result, trace and output, one ranged GET each (the entry names
		// them, §14.6 format 2); the run log's entry, an index object of
		// its own.
		{"hit, second server", func() *s3store.Store { return fresh(0) },
			func(s *s3store.Store) { run(s, surf.Options{}, true) }, s3store.Stats{GET: 5, LIST: 3, PUT: 1}},
		// The same, and the first hit's log entry to read.
		{"hit, second server with memory cache", func() *s3store.Store { return fresh(s3store.DefaultMemCacheSize) },
			func(s *s3store.Store) { run(s, surf.Options{}, true) }, s3store.Stats{GET: 6, LIST: 3, PUT: 1}},
		// Through the server that ran it: two listings, which find the
		// other servers' 2 log entries to read; result, output and trace
		// from memory.
		{"hit, same server", nil, func(s *s3store.Store) { run(s, surf.Options{}, true) }, s3store.Stats{GET: 2, LIST: 2, PUT: 1}},
		// A fresh run without the cache (new inputs put first, not
		// counted): the salt's listing, for the log; one pack and its
		// index.
		{"run, no cache", func() *s3store.Store { inputs("c", "d"); return st },
			func(s *s3store.Store) { run(s, surf.Options{NoCache: true}, false) }, s3store.Stats{LIST: 1, PUT: 2}},
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
