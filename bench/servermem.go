package bench

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/server"
)

// serverRSSTarget is the bound, in MiB, on `amduat serve`'s peak RSS while
// it writes the small artifacts (issue 24).
const serverRSSTarget = 64

// serverWriteClients is the number of client goroutines of the write-rss
// row: many writers at once are what makes a server hold many batches.
const serverWriteClients = 16

// serverWriteRSS measures the peak RSS of an `amduat serve` child process,
// with its default flags, while serverWriteClients clients write
// SmallCount fresh artifacts of SmallSize bytes through it in PutBatch
// calls of serverBigBatch (each acknowledged only when durable), against
// the same server's RSS once it listens, before any request.
func serverWriteRSS(ctx context.Context, e *Env, dir string) (Row, error) {
	clients := serverWriteClients
	const name = "server/write-rss"
	if e.AmduatBin == "" {
		return Row{Name: name, Figure: Quantity{0, "MiB"}, Skipped: true, Note: "no amduat executable to run"}, nil
	}
	store := filepath.Join(dir, "write-rss")
	if _, err := runChild(exec.CommandContext(ctx, e.AmduatBin, "--store", store, "init"), false); err != nil {
		return Row{}, err
	}
	sp, err := startServe(ctx, e.AmduatBin, store)
	if err != nil {
		return Row{}, err
	}
	sp.hwm.read()
	idle := sp.hwm.peak.Load()
	c, err := httpstore.Open(ctx, sp.url, httpstore.Options{})
	if err != nil {
		sp.stop()
		return Row{}, err
	}
	defer c.Close()
	n, size := e.Sizes.SmallCount, e.Sizes.SmallSize
	e.logf("server: %d x %d B through amduat serve (process), PutBatch of %d, %d client(s)", n, size, serverBigBatch, clients)
	bufs := make([][]byte, clients)
	arts := make([][]asl.Artifact, clients)
	for w := range clients {
		bufs[w], arts[w] = make([]byte, serverBigBatch*size), make([]asl.Artifact, serverBigBatch)
	}
	start := time.Now()
	_, err = runPool(clients, (n+serverBigBatch-1)/serverBigBatch, func(w, j int) error {
		lo, hi := j*serverBigBatch, min((j+1)*serverBigBatch, n)
		for i := lo; i < hi; i++ {
			p := bufs[w][(i-lo)*size : (i-lo+1)*size : (i-lo+1)*size]
			FillRandom(p, serverSeed+100, uint64(i))
			arts[w][i-lo] = asl.Untagged(p)
		}
		refs, err := c.PutBatch(ctx, asl.HashSHA256, arts[w][:hi-lo])
		if err == nil && len(refs) != hi-lo {
			err = fmt.Errorf("PutBatch returned %d references for %d artifacts", len(refs), hi-lo)
		}
		return err
	}, nil)
	d := time.Since(start)
	peak, serr := sp.stop()
	if err != nil {
		return Row{}, fmt.Errorf("%s: %w", name, err)
	}
	if serr != nil {
		return Row{}, serr
	}
	so := server.StoreOptions()
	r := Row{Name: name, Figure: Quantity{mibOf(peak), "MiB"}, PeakRSS: peak,
		Target: &Target{fmt.Sprintf("<= %d MiB", serverRSSTarget), OnFigure, AtMost, serverRSSTarget},
		Note: fmt.Sprintf("peak RSS of an amduat serve process with its default flags (its VmHWM, read every 5 ms) while clients write %d x %d B fresh random artifacts through it, PutBatch of %d from %d client goroutine(s) (each batch durable when acknowledged), in %s (%s artifacts/s); the baseline is the same process's peak once it listens, before the first request. Where the memory goes: the executable's pages and the runtime (the idle figure), then the Go heap, whose goal is twice its live part (GOGC=100): the batch bodies in flight (at most --write-buffer, 2 MiB) with their decoded artifacts and pack buffers, Pebble's memtables (at most two of --memtable-size, %s) and block cache (--block-cache, %s, filled by index lookups, which writes make few of), all three in the Go heap in the static build; pack files are written, not mapped, while writing",
			n, size, serverBigBatch, clients, d.Round(time.Millisecond), formatValue(perSec(n, d)), sizeText(int64(so.MemTableSize)), sizeText(so.CacheSize)),
	}
	if idle > 0 {
		r.Baseline = &Baseline{float64(idle) / mib, "MiB", "amduat serve listening, idle"}
	}
	if peak == nil {
		r.Skipped, r.Note = true, "peak RSS of a child process cannot be measured on this system"
	}
	return r, nil
}
