//go:build race

package pebblestore

const raceEnabled = true
