package main

import "testing"

// TestServeUsage: serve's flag mistakes are usage errors (exit 2), each
// one line naming the flag, before any store is opened or port bound.
func TestServeUsage(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for _, args := range [][]string{
		{"--run-jobs", "-1"},
		{"--listen", "127.0.0.1:0", "--unix", "x.sock"},
		{"--tls-cert", "c.pem"},
		{"--cache-size", "1G"},
		{"--listen", "0.0.0.0:0"},
		{"--write-buffer", "0"},
		{"--memtable-size", "2G"},
		{"--block-cache", "2T"},
	} {
		t.Run(args[0], func(t *testing.T) {
			oneErrorLine(t, c.must(exitUsage, append([]string{"serve"}, args...)...), "serve")
		})
	}
}
