// Package asl implements the ASL/1 artifact substrate: Artifacts (bytes plus
// an optional 32-bit TypeTag), References (hash id plus digest of the
// artifact's canonical encoding), the HASH/ASL1 registry, the ENC/ASL1-CORE
// codecs, and the store interfaces that every backend implements.
//
// The normative byte layouts are in SPECS.md §3 (ENC/ASL1-CORE), §4
// (HASH/ASL1), §5 (reference derivation and text form) and §6 (store
// semantics).
//
// A Reference is a comparable value: two References are equal with == exactly
// when their ReferenceBytes are equal, so they can key maps directly.
//
// Stores are small interfaces in the Perkeep style (Fetcher, Receiver,
// Statter, Enumerator), composed into Store. Every method takes a context
// first, because later backends cross a network. Errors carry the sentinels
// ErrNotFound, ErrIntegrity and ErrUnsupported, which callers test with
// errors.Is; any other error is an I/O error.
package asl
