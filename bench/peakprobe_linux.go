package bench

import "syscall"

// peakResetWorks tells whether resetPeak really lowers VmHWM here: it maps
// and touches 16 MiB outside the Go heap, unmaps it, resets the peak and
// requires VmHWM to have dropped by at least half of that. Some kernels
// (and sandboxes that emulate /proc) accept the write to clear_refs and
// keep the old peak, which would make every window report the process's
// whole-life peak.
func peakResetWorks() bool {
	const n = 16 << 20
	m, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return false
	}
	for i := 0; i < n; i += 4096 {
		m[i] = 1
	}
	before, ok := procStatus("VmHWM")
	if syscall.Munmap(m) != nil || !ok || !resetPeak() {
		return false
	}
	after, ok := procStatus("VmHWM")
	return ok && after <= before-n/2
}
