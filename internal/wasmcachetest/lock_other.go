//go:build !unix

package wasmcachetest

import "sync"

// mu stands for the lock file where there is no flock: callers in this
// process still compile a module once; other processes may compile it
// again (the cache's writes are atomic renames).
var mu sync.Mutex

func lock(string) (func(), error) {
	mu.Lock()
	return mu.Unlock, nil
}
