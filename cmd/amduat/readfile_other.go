//go:build !unix

package main

import "os"

// openForRead is os.Open where the descriptor cannot bypass the poller.
func openForRead(path string) (*os.File, error) { return os.Open(path) }
