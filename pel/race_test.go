//go:build race

package pel_test

const raceEnabled = true
