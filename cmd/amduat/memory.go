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
