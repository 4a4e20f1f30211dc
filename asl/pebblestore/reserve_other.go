//go:build !linux

package pebblestore

// allocateFile reports that the reserve must be written with zeros.
func allocateFile(uintptr, int64) (bool, error) { return false, nil }
