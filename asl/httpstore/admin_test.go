package httpstore_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/server"
)

// openEmbedded serves a fresh embedded store and returns a client of it.
func openEmbedded(t *testing.T) (*httpstore.Client, *pebblestore.Store) {
	t.Helper()
	st, err := pebblestore.Create(filepath.Join(t.TempDir(), "store"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s, err := server.New(server.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	c, err := httpstore.Open(t.Context(), ts.URL, httpstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, st
}

// TestMaintenance drives pins, deletion and gc of a served embedded store
// through the client, and checks each against the store itself.
func TestMaintenance(t *testing.T) {
	t.Parallel()
	c, st := openEmbedded(t)
	ctx := t.Context()
	a, err := asl.PutArtifact(ctx, c, asl.HashSHA256, asl.Untagged([]byte("kept")))
	if err != nil {
		t.Fatal(err)
	}
	b, err := asl.PutArtifact(ctx, c, asl.HashSHA256, asl.Untagged([]byte("garbage")))
	if err != nil {
		t.Fatal(err)
	}
	absent := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("absent")))

	if err := c.Pin(ctx, "keep", a, asl.PinOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Pin(ctx, "keep", a, asl.PinOptions{}); err != nil {
		t.Fatalf("re-pinning the same reference: %v", err)
	}
	if err := c.Pin(ctx, "keep", b, asl.PinOptions{}); !errors.Is(err, asl.ErrPinExists) {
		t.Fatalf("re-pointing without force: %v, want ErrPinExists", err)
	}
	if err := c.Pin(ctx, "x", absent, asl.PinOptions{}); !errors.Is(err, asl.ErrNotFound) {
		t.Fatalf("pinning an absent reference: %v, want ErrNotFound", err)
	}
	if err := c.Pin(ctx, "tmp", b, asl.PinOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Pin(ctx, "tmp", a, asl.PinOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	pins, err := c.Pins(ctx)
	local, lerr := st.Pins(ctx)
	if err != nil || lerr != nil || len(pins) != 2 || pins[0] != (asl.Pin{Name: "keep", Ref: a}) || pins[1] != (asl.Pin{Name: "tmp", Ref: a}) || len(local) != 2 || local[1] != pins[1] {
		t.Fatalf("pins %v (%v), on the store %v (%v)", pins, err, local, lerr)
	}
	if ok, err := c.Unpin(ctx, "tmp"); !ok || err != nil {
		t.Fatalf("unpin tmp: %v %v", ok, err)
	}
	if ok, err := c.Unpin(ctx, "tmp"); ok || err != nil {
		t.Fatalf("unpin tmp again: %v %v", ok, err)
	}

	items, err := c.Remove(ctx, []asl.Reference{a, b}, false)
	if err != nil || items[0].State != "refused" || items[0].Reason != "pinned as keep" || items[1].State != "kept" {
		t.Fatalf("remove pinned: %+v %v", items, err)
	}
	dry, err := c.GC(ctx, httpstore.GCRequest{DryRun: true})
	if err != nil || !dry.DryRun || dry.Stored != 2 || dry.Deleted != 1 || dry.Roots != 1 {
		t.Fatalf("dry gc: %+v %v", dry, err)
	}
	rep, err := c.GC(ctx, httpstore.GCRequest{})
	if err != nil || rep.Deleted != 1 || rep.DeletedBytes == 0 {
		t.Fatalf("gc: %+v %v", rep, err)
	}
	if ok, err := asl.Has(ctx, st, b); ok || err != nil {
		t.Fatalf("garbage survived gc: %v %v", ok, err)
	}
	del, err := c.Delete(ctx, []asl.Reference{a, absent})
	if err != nil || !del[0] || del[1] {
		t.Fatalf("forced delete: %v %v", del, err)
	}
	if ok, _ := asl.Has(ctx, st, a); ok {
		t.Fatal("a forced delete left the pinned artifact")
	}

	// The history, when the store keeps one.
	changes, err := c.PinLog(ctx, "tmp")
	if _, ok := any(st).(asl.PinLogger); !ok {
		if !errors.Is(err, asl.ErrUnsupported) {
			t.Fatalf("pin log of a store without history: %v, want ErrUnsupported", err)
		}
		return
	}
	if err != nil || len(changes) != 3 || changes[2].New != (asl.Reference{}) || changes[1].Old != b || changes[1].New != a {
		t.Fatalf("pin log tmp: %+v %v", changes, err)
	}
}

// TestMaintenanceDistrust: answers that do not match the request are
// protocol violations, and a store without the capability answers
// ErrUnsupported.
func TestMaintenanceDistrust(t *testing.T) {
	t.Parallel()
	f := newFixture(t, httpstore.Options{})
	ctx := t.Context()
	ref := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("x")))
	other := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("y")))
	if _, err := f.c.Pins(ctx); !errors.Is(err, asl.ErrUnsupported) {
		t.Fatalf("pins of a memstore server: %v, want ErrUnsupported", err)
	}
	if _, err := f.c.GC(ctx, httpstore.GCRequest{}); !errors.Is(err, asl.ErrUnsupported) {
		t.Fatalf("gc of a memstore server: %v, want ErrUnsupported", err)
	}
	answer := func(body string) func(w http.ResponseWriter, r *http.Request) bool {
		return func(w http.ResponseWriter, r *http.Request) bool {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(body))
			return true
		}
	}
	for _, c := range []struct {
		name string
		body string
		call func() error
	}{
		{"pins out of order", `{"pins":[{"name":"b","ref":"` + ref.String() + `"},{"name":"a","ref":"` + ref.String() + `"}]}`,
			func() error { _, err := f.c.Pins(ctx); return err }},
		{"pin answer names another ref", `{"name":"p","ref":"` + other.String() + `"}`,
			func() error { return f.c.Pin(ctx, "p", ref, asl.PinOptions{}) }},
		{"remove answers fewer refs", `{"refs":[]}`,
			func() error { _, err := f.c.Remove(ctx, []asl.Reference{ref}, false); return err }},
		{"remove answers another ref", `{"refs":[{"ref":"` + other.String() + `","state":"deleted","deleted":true}]}`,
			func() error { _, err := f.c.Delete(ctx, []asl.Reference{ref}); return err }},
		{"unpin answers fewer names", `{"removed":[],"missing":[]}`,
			func() error { _, err := f.c.Unpin(ctx, "p"); return err }},
		{"gc answer not JSON", `deleted everything`,
			func() error { _, err := f.c.GC(ctx, httpstore.GCRequest{}); return err }},
	} {
		f.setHook(answer(c.body))
		if err := c.call(); !errors.Is(err, httpstore.ErrProtocol) {
			t.Errorf("%s: %v, want ErrProtocol", c.name, err)
		}
	}
}
