package asl

import (
	"context"
	"errors"
)

// The maintenance capabilities of a store (SPECS.md §19.8, §6.5): named
// roots, their history and deletion. They are optional, discovered by type
// assertion as Perkeep's blobserver does, and every backend that can keep
// them implements the same interfaces, so the command line, the server
// routes and the Go API share one code path.

// Pin is one named root (SPECS.md §19.8).
type Pin struct {
	Name string    `json:"name"`
	Ref  Reference `json:"ref"`
}

// ErrPinExists is returned by Pin when the name already names another
// reference and the caller did not ask to re-point it.
var ErrPinExists = errors.New("pin exists")

// PinOptions qualify one change of a pin.
type PinOptions struct {
	// Force re-points a name that names another reference. Without it such
	// a change fails with ErrPinExists (re-pinning the same reference is a
	// no-op that succeeds).
	Force bool
}

// Pinner keeps named roots. A pin is durable when Pin or Unpin returns.
type Pinner interface {
	// Pin names ref, which must be stored (ErrNotFound otherwise).
	Pin(ctx context.Context, name string, ref Reference, opts PinOptions) error
	// Unpin removes the pin name and reports whether it existed.
	Unpin(ctx context.Context, name string) (bool, error)
	// Pins returns every pin in ascending name order.
	Pins(ctx context.Context) ([]Pin, error)
}

// PinChange is one entry of a pin's history, as git's reflog keeps one: the
// reference a name named before a change and after it (the zero Reference
// for absent). Time and Actor are store metadata, never part of an
// artifact or a reference.
type PinChange struct {
	Seq      uint64    `json:"seq"`
	Name     string    `json:"name"`
	Old      Reference `json:"old"`
	New      Reference `json:"new"`
	UnixNano int64     `json:"time_unix_nano"`
	Actor    string    `json:"actor,omitempty"`
}

// PinLogger reports the history of pins: every change of name in the order
// made (every change of every pin when name is empty).
type PinLogger interface {
	PinLog(ctx context.Context, name string) ([]PinChange, error)
}

// Deleter removes artifacts. deleted[i] reports whether refs[i] was stored.
// Delete does not check whether anything still refers to them (the caller
// does, through closure.Protected).
type Deleter interface {
	Delete(ctx context.Context, refs []Reference) (deleted []bool, err error)
}

type actorKey struct{}

// WithActor returns ctx carrying the name of who makes a change (a token's
// name, "local" for the command line), recorded in PinChange.Actor.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// Actor returns the actor ctx carries, or "".
func Actor(ctx context.Context) string {
	s, _ := ctx.Value(actorKey{}).(string)
	return s
}
