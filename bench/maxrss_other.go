//go:build !unix

package bench

import "os"

// ChildMaxRSS is nil where the system does not report a child's peak
// resident memory.
func ChildMaxRSS(*os.ProcessState) *int64 { return nil }
