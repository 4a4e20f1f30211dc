package main

import (
	"errors"
	"fmt"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
)

// openPebble opens the store in dir as a.open asks, and heals it when
// Pebble's files are damaged (SPECS.md §6.4, "Rebuilding the index"): a
// writable open rebuilds the index from the packs by itself; a read-only
// open that fails on such damage tries a writable open once (which
// rebuilds), and, when that cannot be had (the store is locked by a writer
// or on a read-only file system), fails with the first error and why the
// index was not rebuilt. What a rebuild did is printed on stderr.
func (a *app) openPebble(opts *pebblestore.Options) (*pebblestore.Store, error) {
	var o pebblestore.Options
	if opts != nil {
		o = *opts
	}
	o.OnRebuild = func(r pebblestore.RebuildReport) {
		fmt.Fprintf(a.stderr, "amduat: %s: %s\n", a.storeDir, r)
	}
	s, err := pebblestore.Open(a.storeDir, &o)
	if err == nil || !o.ReadOnly || !errors.Is(err, asl.ErrIntegrity) || errors.Is(err, pebblestore.ErrNoStore) {
		return s, err
	}
	o.ReadOnly = false
	ws, werr := pebblestore.Open(a.storeDir, &o)
	if werr != nil {
		return nil, fmt.Errorf("%w (the index could not be rebuilt from the packs: %v)", err, werr)
	}
	// A writable store serves the read-only command (it rebuilt the index,
	// or a writer repaired it meanwhile).
	return ws, nil
}
