//go:build race

package main

// raceEnabled makes TestMain build the binary under test with -race too.
const raceEnabled = true
