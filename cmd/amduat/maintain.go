package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/closure"
	"github.com/amduat/amduat/server"
)

// The doors through which pin, rm and gc maintain a store (SPECS.md §16.3,
// §18.10): the same Go interfaces (asl.Pinner, asl.Deleter, a collection)
// on a directory and on a server, so that `--store http://…` prints what
// `--store DIR` prints.

// maintStore is what pin and rm need of a store.
type maintStore interface {
	backend
	asl.Pinner
	asl.Deleter
}

// openMaint opens --store for `what` (a command name: "pin", "rm", "gc"):
// an embedded store, or a server (its admin routes, token in
// AMDUAT_TOKEN), or any other backend with the capabilities; else
// ERR_UNSUPPORTED (exit 5). A directory held by a running server is exit 6
// with a message naming the command that works: the same one against the
// server.
func (a *app) openMaint(what string, readOnly bool) (maintStore, error) {
	if !isRemote(a.storeDir) && !isS3(a.storeDir) {
		ps, err := a.openEmbedded(what, readOnly)
		if errors.Is(err, pebblestore.ErrLocked) {
			return nil, lockedErr(a.storeDir, what)
		}
		return ps, err
	}
	var s backend
	var err error
	if readOnly {
		s, err = a.openStoreReadOnly()
	} else {
		s, err = a.openStore()
	}
	if err != nil {
		return nil, err
	}
	m, ok := s.(maintStore)
	if !ok {
		s.Close()
		return nil, fail(exitUnsupported, a.storeDir, fmt.Errorf("%s needs an embedded store (--store DIR) or a server (--store http://…), not this bucket: %w", what, asl.ErrUnsupported))
	}
	return m, nil
}

// lockedErr is the error of a maintenance command on a directory another
// process holds: usually `amduat serve`, which runs the same command on
// its own store while it serves.
func lockedErr(dir, what string) error {
	return fail(exitIO, dir, fmt.Errorf("%w; if `amduat serve` holds it, run the command against the server instead: `amduat %s --store http://HOST:PORT …` (the URL serve printed; a token with the admin scope in AMDUAT_TOKEN when it has --auth-file)", pebblestore.ErrLocked, what))
}

// remover is a store that judges and deletes on its side (a server: one
// request, under the server's maintenance lock).
type remover interface {
	Remove(ctx context.Context, refs []asl.Reference, force bool) ([]httpstore.DeleteItem, error)
}

// removeRefs is `amduat rm`: refs refused when pinned or reachable from a
// pin (closure.Protected) unless force, else deleted.
func removeRefs(ctx context.Context, s maintStore, refs []asl.Reference, force bool) ([]httpstore.DeleteItem, error) {
	if r, ok := s.(remover); ok {
		return r.Remove(ctx, refs, force)
	}
	return server.Remove(ctx, s, s, refs, force)
}

// collect is `amduat gc` on a directory (closure.Collect) or a server
// (POST /v1/gc); anything else is ERR_UNSUPPORTED.
func collect(ctx context.Context, s backend, opts closure.GCOptions) (pebblestore.GCReport, error) {
	switch st := s.(type) {
	case *pebblestore.Store:
		return closure.Collect(ctx, st, opts)
	case *httpstore.Client:
		rep, err := st.GC(ctx, httpstore.GCRequest{
			DryRun: opts.DryRun, KeepWithinNanos: int64(opts.KeepWithin), KeepRuns: opts.KeepRuns, CompactBelow: opts.CompactBelow,
		})
		return pebblestore.GCReport(rep), err
	}
	return pebblestore.GCReport{}, fmt.Errorf("gc needs an embedded store (--store DIR) or a server (--store http://…): %w", asl.ErrUnsupported)
}

// openGC opens --store for gc: a directory (locked; a running server's
// directory is refused with the command that works) or a server.
func (a *app) openGC() (backend, error) {
	if isRemote(a.storeDir) {
		return a.openStore()
	}
	ps, err := a.openEmbedded("gc", false)
	if errors.Is(err, pebblestore.ErrLocked) {
		return nil, lockedErr(a.storeDir, "gc")
	}
	return ps, err
}
