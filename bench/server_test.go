package bench

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/internal/testexit"
)

// lyingTarget answers the load test with damaged bytes and claims every
// reference is present.
type lyingTarget struct{ embeddedTarget }

func (l lyingTarget) Fetch(ctx context.Context, ref asl.Reference) (io.ReadCloser, asl.Header, error) {
	a, err := asl.Get(ctx, l.Store, ref, 0)
	if err != nil {
		return nil, asl.Header{}, err
	}
	b := bytes.Clone(a.Bytes)
	b[len(b)/2] ^= 1
	return io.NopCloser(bytes.NewReader(b)), a.Header(), nil
}

func (l lyingTarget) Stat(ctx context.Context, ref asl.Reference) (asl.Info, error) {
	return asl.Info{Ref: ref}, nil
}

// TestLoadChecksAnswers: the load test counts nothing wrong on an honest
// store, and counts wrong bytes and wrong presence on a lying one, so its
// zero is not vacuous.
func TestLoadChecksAnswers(t *testing.T) {
	s, err := pebblestore.Create(filepath.Join(t.TempDir(), "store"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	honest, err := runLoad(ctx, embeddedTarget{s}, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for op, n := range honest.ops {
		if n == 0 {
			t.Errorf("no %s operation in %d requests", loadOpNames[op], honest.requests)
		}
	}
	if honest.errors != 0 || honest.wrong != 0 {
		t.Fatalf("honest store: %d errors, %d wrong: %s", honest.errors, honest.wrong, honest.samplesText())
	}
	lying, err := runLoad(ctx, lyingTarget{embeddedTarget{s}}, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if lying.wrong < lying.ops[opGet] || lying.errors != 0 {
		t.Fatalf("lying store: %d wrong answers for %d gets and %d has, %d errors", lying.wrong, lying.ops[opGet], lying.ops[opHas], lying.errors)
	}
}

// TestWatchHWMIsTheChilds: the peak RSS of a child is its own, not the
// parent's peak at the time of the fork, which Linux carries into a
// vforked child's getrusage ru_maxrss; also where the kernel ignores the
// reset of this process's peak (as one CI machine did).
func TestWatchHWMIsTheChilds(t *testing.T) {
	if os.Getenv("AMDUAT_BENCH_HWM_CHILD") != "" {
		n, _ := strconv.Atoi(os.Getenv("AMDUAT_BENCH_HWM_CHILD"))
		b := make([]byte, n)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		// Hold the memory until the parent has seen it: it closes stdin.
		io.Copy(io.Discard, os.Stdin)
		runtime.KeepAlive(b)
		testexit.Exit(0)
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	// This process peaks at 96 MiB and holds 48 MiB (some 270 and 170 MiB
	// of RSS under -race, with the detector's shadow); the child touches
	// 8 MiB (about 85 MiB of RSS under -race). A peak carried over from
	// this process would be at least this process's VmHWM at the fork.
	peak := make([]byte, 96<<20)
	for i := 0; i < len(peak); i += 4096 {
		peak[i] = 1
	}
	runtime.KeepAlive(peak)
	peak = nil
	big := make([]byte, 48<<20)
	for i := 0; i < len(big); i += 4096 {
		big[i] = 1
	}
	parentHWM, ok := procStatus("VmHWM")
	if !ok {
		t.Skip("no VmHWM in /proc/self/status")
	}
	const childBytes = 8 << 20
	realReset, realWatch := resetPeak, measuredWatch
	defer func() { resetPeak, measuredWatch = realReset, realWatch }()
	// The child holds its 32 MiB until the watch of its peak has read
	// them: the test waits on that reading, not on a time.
	watches := make(chan *hwmWatch, 1)
	measuredWatch = func(pid int) *hwmWatch {
		w := realWatch(pid)
		watches <- w
		return w
	}
	for _, c := range []struct {
		name  string
		reset func() bool
	}{{"reset", realReset}, {"reset ignored", func() bool { return true }}} {
		t.Run(c.name, func(t *testing.T) {
			resetPeak = c.reset
			cmd := exec.Command(os.Args[0], "-test.run=^TestWatchHWMIsTheChilds$")
			cmd.Env = append(os.Environ(), "AMDUAT_BENCH_HWM_CHILD="+strconv.Itoa(childBytes))
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				defer stdin.Close()
				w := <-watches
				hang := time.After(time.Minute) // a hang, not a timing
				for w.peak.Load() < childBytes {
					select {
					case <-hang:
						return
					case <-w.done:
						return
					case <-time.After(time.Millisecond):
					}
				}
			}()
			r, err := runChild(cmd, false)
			runtime.KeepAlive(big)
			if err != nil {
				t.Fatal(err)
			}
			if r.maxRSS == nil || *r.maxRSS < childBytes || *r.maxRSS >= parentHWM {
				t.Fatalf("child peak RSS %v, want between its %s and below this process's peak %s", rssOf(r.maxRSS), rssOf(new(int64(childBytes))), rssOf(&parentHWM))
			}
			t.Logf("child peak %s; its getrusage ru_maxrss says %s", rssOf(r.maxRSS), rssOf(ChildMaxRSS(cmd.ProcessState)))
		})
	}
}

func TestServerLoadDuration(t *testing.T) {
	for _, c := range []struct {
		s    Sizes
		want time.Duration
	}{{FullSizes(), 10 * time.Second}, {QuickSizes(), 3 * time.Second}, {Sizes{SmallCount: 10}, 500 * time.Millisecond}} {
		if got := serverLoadDuration(c.s); got != c.want {
			t.Errorf("%+v: %s, want %s", c.s, got, c.want)
		}
	}
}
