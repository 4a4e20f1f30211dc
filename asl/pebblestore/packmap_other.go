//go:build !unix

package pebblestore

func mapPack(uintptr, int64) []byte { return nil }

func unmapPack([]byte) {}
