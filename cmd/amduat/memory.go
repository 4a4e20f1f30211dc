package main

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"runtime/debug"
	"strconv"
)

// memoryBudget is the --max-memory of pel run (SPECS.md §12.8, §16.4): the
// flag when set; otherwise the Go memory limit when GOMEMLIMIT set one;
// otherwise 3/4 of the physical memory that /proc/meminfo reports; else 0
// (no budget).
func memoryBudget(flag uint64) uint64 {
	if flag > 0 {
		return flag
	}
	if lim := debug.SetMemoryLimit(-1); lim > 0 && lim < math.MaxInt64 {
		return uint64(lim)
	}
	if total := physicalMemory(); total > 0 {
		return total / 4 * 3
	}
	return 0
}

// physicalMemory reads MemTotal from /proc/meminfo (Linux); 0 if unknown.
func physicalMemory() uint64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) == 3 && string(f[0]) == "MemTotal:" && string(f[2]) == "kB" {
			kb, err := strconv.ParseUint(string(f[1]), 10, 64)
			if err != nil || kb > math.MaxUint64/1024 {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}

// defaultWorkBudget is the default --max-work of pel run and --max-run-work
// of serve (SPECS.md §12.8): 64 GiB of node outputs, about a minute of
// SHA-256 on one core. Runs over ropes hold almost none of those bytes, so
// without it a doubling chain of concats would hash for ever.
const defaultWorkBudget = 64 << 30

// sizeValue is a flag holding a byte count written as parseSize accepts it.
type sizeValue struct{ n *uint64 }

func (v sizeValue) String() string {
	if v.n == nil {
		return "0"
	}
	return formatSize(*v.n)
}

func (v sizeValue) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*v.n = n
	return nil
}

func (sizeValue) Type() string { return "size" }

// formatSize writes n as parseSize reads it, in the largest unit that
// divides it exactly.
func formatSize(n uint64) string {
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"T", 40}, {"G", 30}, {"M", 20}, {"K", 10}} {
		if n != 0 && n%(1<<u.shift) == 0 {
			return strconv.FormatUint(n>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatUint(n, 10)
}
