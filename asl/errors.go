package asl

import (
	"errors"

	"github.com/amduat/amduat/enc"
)

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

// IsContentError reports whether err describes the store's content: an
// artifact that is missing (ErrNotFound), damaged or malformed (ErrIntegrity,
// enc.ErrMalformed) or under an unregistered hash (ErrUnsupported). Any
// other error (I/O, cancellation) is operational. Callers that treat derived
// data as a cache turn content errors into misses and keep operational ones.
func IsContentError(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrIntegrity) ||
		errors.Is(err, ErrUnsupported) || errors.Is(err, enc.ErrMalformed)
}
