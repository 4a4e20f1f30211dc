package metrics

import (
	"bytes"
	"os"
	"runtime"
	rtmetrics "runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
)

// goMetric maps one runtime/metrics sample to an exposition family; the
// names are those the Prometheus Go collector used, so dashboards keep
// working.
type goMetric struct {
	name, help string
	typ        Type
	key        string // runtime/metrics name
}

var goMetrics = []goMetric{
	{"go_memstats_alloc_bytes_total", "Bytes allocated in the heap since the process started.", TypeCounter, "/gc/heap/allocs:bytes"},
	{"go_memstats_heap_alloc_bytes", "Bytes of allocated heap objects (live and not yet swept).", TypeGauge, "/memory/classes/heap/objects:bytes"},
	{"go_memstats_heap_objects", "Heap objects allocated and not yet swept.", TypeGauge, "/gc/heap/objects:objects"},
	{"go_memstats_next_gc_bytes", "Heap size the next garbage collection aims at.", TypeGauge, "/gc/heap/goal:bytes"},
	{"go_memstats_sys_bytes", "Bytes of memory the Go runtime obtained from the operating system.", TypeGauge, "/memory/classes/total:bytes"},
	{"go_gc_cycles_total", "Completed garbage collection cycles.", TypeCounter, "/gc/cycles/total:gc-cycles"},
	{"go_gc_gogc_percent", "The GOGC setting.", TypeGauge, "/gc/gogc:percent"},
	{"go_gc_gomemlimit_bytes", "The GOMEMLIMIT setting.", TypeGauge, "/gc/gomemlimit:bytes"},
	{"go_sched_gomaxprocs_threads", "The GOMAXPROCS setting.", TypeGauge, "/sched/gomaxprocs:threads"},
}

// GoCollector reports the Go runtime's state at each scrape (SPECS.md
// §18.8): go_goroutines, go_threads, go_info{version} and the families of
// goMetrics, read through runtime/metrics (no stop of the world).
type GoCollector struct{}

// NewGoCollector returns the Go runtime collector.
func NewGoCollector() GoCollector { return GoCollector{} }

func (GoCollector) names() []string {
	ns := []string{"go_goroutines", "go_threads", "go_info"}
	for _, m := range goMetrics {
		ns = append(ns, m.name)
	}
	return ns
}

func (GoCollector) collect(fs []Family) []Family {
	fs = append(fs,
		gauge("go_goroutines", "Goroutines that currently exist.", float64(runtime.NumGoroutine())),
		gauge("go_threads", "OS threads created.", float64(pprof.Lookup("threadcreate").Count())),
		Family{Name: "go_info", Help: "The Go version the binary was built with.", Type: TypeGauge,
			Samples: []Sample{{Name: "go_info", Labels: []Label{{"version", runtime.Version()}}, Value: 1}}})
	ss := make([]rtmetrics.Sample, len(goMetrics))
	for i, m := range goMetrics {
		ss[i].Name = m.key
	}
	rtmetrics.Read(ss)
	for i, m := range goMetrics {
		var v float64
		switch ss[i].Value.Kind() {
		case rtmetrics.KindUint64:
			v = float64(ss[i].Value.Uint64())
		case rtmetrics.KindFloat64:
			v = ss[i].Value.Float64()
		default: // not supported by this runtime
			continue
		}
		fs = append(fs, Family{Name: m.name, Help: m.help, Type: m.typ, Samples: []Sample{{Name: m.name, Value: v}}})
	}
	return fs
}

// ProcessCollector reports the process's resources at each scrape from
// /proc (SPECS.md §18.8): process_cpu_seconds_total,
// process_resident_memory_bytes, process_virtual_memory_bytes,
// process_start_time_seconds, process_open_fds and process_max_fds. A
// family whose source cannot be read (another system than Linux) is left
// out of the scrape.
type ProcessCollector struct{}

// NewProcessCollector returns the process collector.
func NewProcessCollector() ProcessCollector { return ProcessCollector{} }

func (ProcessCollector) names() []string {
	return []string{"process_cpu_seconds_total", "process_resident_memory_bytes", "process_virtual_memory_bytes",
		"process_start_time_seconds", "process_open_fds", "process_max_fds"}
}

// userHZ is the unit of the clock-tick fields of /proc/PID/stat, fixed at
// 100 by Linux's ABI whatever the kernel's HZ.
const userHZ = 100

func (ProcessCollector) collect(fs []Family) []Family {
	if st, err := readProcStat(); err == nil {
		fs = append(fs,
			Family{Name: "process_cpu_seconds_total", Help: "User and system CPU time spent, in seconds.", Type: TypeCounter,
				Samples: []Sample{{Name: "process_cpu_seconds_total", Value: float64(st.utime+st.stime) / userHZ}}},
			gauge("process_resident_memory_bytes", "Resident memory size in bytes.", float64(st.rss*uint64(os.Getpagesize()))),
			gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", float64(st.vsize)))
		if bt, err := bootTime(); err == nil {
			fs = append(fs, gauge("process_start_time_seconds", "Start time of the process since the Unix epoch, in seconds.", float64(bt)+float64(st.start)/userHZ))
		}
	}
	if d, err := os.Open("/proc/self/fd"); err == nil {
		names, err := d.Readdirnames(-1)
		d.Close()
		if err == nil {
			fs = append(fs, gauge("process_open_fds", "Open file descriptors.", float64(len(names))))
		}
	}
	if n, err := maxFDs(); err == nil {
		fs = append(fs, gauge("process_max_fds", "The limit on open file descriptors.", n))
	}
	return fs
}

func gauge(name, help string, v float64) Family {
	return Family{Name: name, Help: help, Type: TypeGauge, Samples: []Sample{{Name: name, Value: v}}}
}

type procStat struct{ utime, stime, start, vsize, rss uint64 }

// readProcStat reads the fields of /proc/self/stat the collector uses:
// after the command name in parentheses (which may hold spaces), field 14
// utime, 15 stime, 22 starttime, 23 vsize and 24 rss (proc(5)).
func readProcStat() (procStat, error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return procStat{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, strconv.ErrSyntax
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3
	if len(f) < 22 {
		return procStat{}, strconv.ErrSyntax
	}
	var st procStat
	for _, p := range []struct {
		field int
		dst   *uint64
	}{{14, &st.utime}, {15, &st.stime}, {22, &st.start}, {23, &st.vsize}, {24, &st.rss}} {
		if *p.dst, err = strconv.ParseUint(f[p.field-3], 10, 64); err != nil {
			return procStat{}, err
		}
	}
	return st, nil
}

// bootTime reads the btime line of /proc/stat: the boot time in seconds
// since the Unix epoch.
func bootTime() (uint64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, strconv.ErrSyntax
}

// maxFDs reads the soft limit of the "Max open files" line of
// /proc/self/limits.
func maxFDs() (float64, error) {
	b, err := os.ReadFile("/proc/self/limits")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Max open files"); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				break
			}
			if f[0] == "unlimited" {
				return 0, strconv.ErrRange
			}
			return strconv.ParseFloat(f[0], 64)
		}
	}
	return 0, strconv.ErrSyntax
}
