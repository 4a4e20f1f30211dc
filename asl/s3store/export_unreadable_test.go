package s3store

import "time"

// SetUnreadableFor shortens the retry bound of SlowDownRead for a test and
// returns the function that restores it.
func SetUnreadableFor(d time.Duration) (restore func()) {
	old := unreadableFor
	unreadableFor = d
	return func() { unreadableFor = old }
}
