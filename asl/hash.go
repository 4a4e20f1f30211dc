package asl

import (
	"crypto/sha256"
	"fmt"
	"hash"

	"github.com/zeebo/blake3"
)

// HashID identifies a hash algorithm in the HASH/ASL1 registry (SPECS.md §4).
type HashID uint16

const (
	// HashReserved (0x0000) is never valid: a Reference with it is rejected.
	HashReserved HashID = 0x0000
	// HashSHA256 is HASH-ASL1-256: SHA-256, 32-byte digest, mandatory.
	HashSHA256 HashID = 0x0001
	// HashBLAKE3 is BLAKE3-256 (32-byte digest) in the experimental range.
	HashBLAKE3 HashID = 0x8001
)

// HashAlgorithm describes one registered algorithm.
type HashAlgorithm struct {
	ID        HashID
	Name      string // registry name, e.g. "HASH-ASL1-256"
	Short     string // command-line name, e.g. "sha256"
	DigestLen int
	New       func() hash.Hash
}

var hashRegistry = []HashAlgorithm{
	{ID: HashSHA256, Name: "HASH-ASL1-256", Short: "sha256", DigestLen: sha256.Size, New: sha256.New},
	{ID: HashBLAKE3, Name: "BLAKE3-256", Short: "blake3", DigestLen: 32, New: func() hash.Hash { return blake3.New() }},
}

// LookupHash returns the registered algorithm for id.
func LookupHash(id HashID) (HashAlgorithm, bool) {
	for _, a := range hashRegistry {
		if a.ID == id {
			return a, true
		}
	}
	return HashAlgorithm{}, false
}

// HashByName returns the algorithm whose Short or Name is name.
func HashByName(name string) (HashAlgorithm, error) {
	for _, a := range hashRegistry {
		if a.Short == name || a.Name == name {
			return a, nil
		}
	}
	return HashAlgorithm{}, fmt.Errorf("unknown hash %q (known: sha256, blake3): %w", name, ErrUnsupported)
}

// Hashes lists the registered algorithms in registry order.
func Hashes() []HashAlgorithm { return append([]HashAlgorithm(nil), hashRegistry...) }

func (id HashID) String() string {
	if a, ok := LookupHash(id); ok {
		return a.Name
	}
	return fmt.Sprintf("hash-0x%04x", uint16(id))
}
