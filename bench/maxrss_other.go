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
