//go:build !unix

package filelock

import "sync"

// mu stands for the lock file where there is no flock: callers in this
// process still do the work once; other processes may do it again (what
// they keep is written by atomic renames).
var mu sync.Mutex

// Lock holds mu: callers in this process exclude each other.
func Lock(string) (func(), error) {
	mu.Lock()
	return mu.Unlock, nil
}
