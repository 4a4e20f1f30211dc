//go:build unix

package bench

import (
	"os"
	"runtime"
	"syscall"
	"time"
)

// ChildMaxRSS is the peak resident memory of an exited child process, in
// bytes, when the system reports it.
func ChildMaxRSS(ps *os.ProcessState) *int64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok || ru.Maxrss <= 0 {
		return nil
	}
	v := int64(ru.Maxrss)
	if runtime.GOOS != "darwin" && runtime.GOOS != "ios" {
		v <<= 10 // kilobytes elsewhere; bytes on Darwin
	}
	return &v
}

// processCPU is the CPU time (user + system) this process has used so far,
// or 0 when the system does not report it.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// childMinorFaults is the number of minor page faults of an exited child
// process (pages it touched that were already in memory, mostly the
// executable's), or -1 when the system does not report it.
func childMinorFaults(ps *os.ProcessState) int64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return -1
	}
	return int64(ru.Minflt)
}
