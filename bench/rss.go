package bench

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"sync"
	"time"
)

// RSS measurement methods, in order of preference.
const (
	// RSSReset: the kernel's peak (VmHWM in /proc/self/status) is reset by
	// writing "5" to /proc/self/clear_refs (Linux 4.0+) at the start of a
	// window and read at its end (chosen only where a probe saw the reset
	// lower VmHWM). Exact, and it misses no short spike.
	RSSReset = "vmhwm-reset"
	// RSSSampled: VmRSS is sampled every millisecond during the window; a
	// spike shorter than that can be missed.
	RSSSampled = "vmrss-sampled"
	// RSSNone: no /proc; peak RSS is not reported.
	RSSNone = "none"
)

// procStatus returns a "kB" field of /proc/self/status in bytes.
func procStatus(field string) (int64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	prefix := field + ":"
	for sc.Scan() {
		line := sc.Text()
		if len(line) <= len(prefix) || line[:len(prefix)] != prefix {
			continue
		}
		f := bytes.Fields([]byte(line[len(prefix):]))
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, false
		}
		n, err := strconv.ParseInt(string(f[0]), 10, 64)
		return n << 10, err == nil
	}
	return 0, false
}

// resetPeak resets this process's VmHWM to its current RSS. It is a
// variable so that a test can stand in for a kernel that ignores the
// reset.
var resetPeak = func() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

var (
	rssOnce   sync.Once
	rssMethod string
)

// RSSMethod reports how this process measures peak RSS (probed once).
func RSSMethod() string {
	rssOnce.Do(func() {
		_, hwm := procStatus("VmHWM")
		switch _, rss := procStatus("VmRSS"); {
		case hwm && peakResetWorks():
			rssMethod = RSSReset
		case rss:
			rssMethod = RSSSampled
		default:
			rssMethod = RSSNone
		}
	})
	return rssMethod
}

// Window measures the peak RSS and the peak Go heap (objects, live or not
// yet swept, sampled every millisecond) from StartWindow to Stop.
type Window struct {
	method   string
	stop     chan struct{}
	wg       sync.WaitGroup
	peakRSS  int64
	peakHeap uint64
}

// StartWindow collects garbage and returns freed memory to the OS, so that
// the window starts from what the process really holds, then starts
// measuring.
func StartWindow() *Window {
	runtime.GC()
	debug.FreeOSMemory()
	w := &Window{method: RSSMethod(), stop: make(chan struct{})}
	if w.method == RSSReset && !resetPeak() {
		w.method = RSSSampled
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			w.sample()
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// sample takes one reading of the heap and, when sampling, of the RSS.
func (w *Window) sample() {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if v := s[0].Value.Uint64(); v > w.peakHeap {
		w.peakHeap = v
	}
	if w.method == RSSSampled {
		if v, ok := procStatus("VmRSS"); ok && v > w.peakRSS {
			w.peakRSS = v
		}
	}
}

// Stop ends the window and returns the peak RSS in bytes (nil when it
// cannot be measured) and the peak Go heap in bytes.
func (w *Window) Stop() (rss *int64, heap uint64) {
	close(w.stop)
	w.wg.Wait()
	w.sample() // the state at the end counts too
	switch w.method {
	case RSSReset:
		if v, ok := procStatus("VmHWM"); ok {
			return &v, w.peakHeap
		}
	case RSSSampled:
		if w.peakRSS > 0 {
			v := w.peakRSS
			return &v, w.peakHeap
		}
	}
	return nil, w.peakHeap
}

// IOCounters are the process's I/O counters from /proc/self/io: bytes
// passed to read and write system calls (RChar, WChar, including page-cache
// hits) and bytes the process caused to be read from or sent to the block
// device (ReadBytes, WriteBytes).
type IOCounters struct {
	RChar, WChar, SyscR, SyscW, ReadBytes, WriteBytes int64
	OK                                                bool
}

// ReadIO returns the current counters; OK is false where /proc/self/io is
// missing.
func ReadIO() IOCounters {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return IOCounters{}
	}
	c := IOCounters{OK: true}
	fields := map[string]*int64{"rchar": &c.RChar, "wchar": &c.WChar, "syscr": &c.SyscR, "syscw": &c.SyscW,
		"read_bytes": &c.ReadBytes, "write_bytes": &c.WriteBytes}
	for _, line := range bytes.Split(b, []byte("\n")) {
		k, v, ok := bytes.Cut(line, []byte(": "))
		if p := fields[string(k)]; ok && p != nil {
			*p, _ = strconv.ParseInt(string(v), 10, 64)
		}
	}
	return c
}

// Sub returns the counters accumulated since before.
func (c IOCounters) Sub(before IOCounters) IOCounters {
	return IOCounters{RChar: c.RChar - before.RChar, WChar: c.WChar - before.WChar, SyscR: c.SyscR - before.SyscR,
		SyscW: c.SyscW - before.SyscW, ReadBytes: c.ReadBytes - before.ReadBytes, WriteBytes: c.WriteBytes - before.WriteBytes,
		OK: c.OK && before.OK}
}

// procTick is the unit of the CPU times in /proc: Linux's fixed USER_HZ of
// 100 ticks per second.
const procTick = time.Second / 100

// pidCPU is the CPU time (user and system) of process pid so far, from
// /proc/PID/stat (utime and stime, in procTick); false where there is no
// such file.
func pidCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name, in parentheses, may hold spaces: the fields
	// counted from the third start after its last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	stime, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * procTick, true
}

// hostSteal is the CPU time the hypervisor has taken from this machine's
// CPUs so far, summed over them: the steal field of /proc/stat's cpu line
// (in procTick); false where there is no such field. A virtual machine's
// CPUs stall while stolen, whatever runs on them, so the rows that compare
// two sides report it for each (BENCHMARKS.md, "get-vs-files").
func hostSteal() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := bytes.Cut(b, []byte{'\n'})
	f := bytes.Fields(line)
	// cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || string(f[0]) != "cpu" {
		return 0, false
	}
	steal, err := strconv.ParseInt(string(f[8]), 10, 64)
	if err != nil {
		return 0, false
	}
	return time.Duration(steal) * procTick, true
}
