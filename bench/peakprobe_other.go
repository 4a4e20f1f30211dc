//go:build !linux

package bench

// peakResetWorks: only Linux resets VmHWM.
func peakResetWorks() bool { return false }
