//go:build !unix

package bench

import (
	"os"
	"time"
)

// ChildMaxRSS is nil where the system does not report a child's peak
// resident memory.
func ChildMaxRSS(*os.ProcessState) *int64 { return nil }

// processCPU is 0 where the system does not report CPU time.
func processCPU() time.Duration { return 0 }

// childMinorFaults is -1 where the system does not report page faults.
func childMinorFaults(*os.ProcessState) int64 { return -1 }
