package asl

import "errors"

// Store error sentinels (SPECS.md §6.3). Backends wrap them with %w and name
// the reference; callers test with errors.Is. Any store error that wraps none
// of them is an I/O error.
var (
	// ErrNotFound: no artifact is stored under the reference.
	ErrNotFound = errors.New("ERR_NOT_FOUND")
	// ErrIntegrity: stored bytes do not hash to the reference, a stored
	// record is damaged, or a reference is malformed.
	ErrIntegrity = errors.New("ERR_INTEGRITY")
	// ErrUnsupported: the reference's hash id is well framed but not
	// registered, or the store cannot perform the operation.
	ErrUnsupported = errors.New("ERR_UNSUPPORTED")
)
