package s3store

import "time"

// SetTransientFor shortens the retry bound of transient answers for a
// test and returns the function that restores it.
func SetTransientFor(d time.Duration) (restore func()) {
	old := transientFor
	transientFor = d
	return func() { transientFor = old }
}
