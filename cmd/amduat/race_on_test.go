//go:build race

package main

// raceEnabled makes TestMain build the binary under test with -race too
// when AMDUAT_LONG=1 (e2e_test.go).
const raceEnabled = true
