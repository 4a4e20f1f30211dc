package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/internal/fileserver"
)

// The file-server baseline (issue 24): a minimal standard-library HTTP
// server that answers GET /f/NAME with the file NAME of a directory
// (http.ServeContent, which sends a large body with sendfile), holding the
// same bytes as the artifacts the amduat server serves. It is the limit of
// net/http on this machine, and the server's GET rows are compared with it
// in the same run, through the same client code: one GET, the body read to
// EOF through an asl.Hasher and its reference compared with the one asked
// for, as every amduat client checks what it reads.

// fileServer serves dir on a loopback port.
type fileServer struct {
	hs   *http.Server
	url  string
	done chan error
}

func startFileServer(dir string) (*fileServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	fs := &fileServer{hs: &http.Server{Handler: labelServe("files", fileserver.Handler(dir)), ReadHeaderTimeout: 10 * time.Second}, url: "http://" + ln.Addr().String(), done: make(chan error, 1)}
	go func() { fs.done <- fs.hs.Serve(ln) }()
	return fs, nil
}

func (fs *fileServer) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := fs.hs.Shutdown(ctx)
	if serr := <-fs.done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// verifiedGet GETs url, saying that it checks the digest itself, and
// reads the body to EOF through h, which must then give ref; buf is the
// read buffer.
func verifiedGet(ctx context.Context, c *http.Client, url string, ref asl.Reference, size int64, h *asl.Hasher, buf []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	// As every amduat client does: it checks the digest below (SPECS.md
	// §18.4; the file server ignores the header).
	req.Header.Set(httpstore.HeaderVerify, httpstore.VerifyClient)
	if p, ok := pprof.Label(ctx, "phase"); ok {
		req.Header.Set(phaseHeader, p)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := h.Reset(ref.HashID(), asl.Header{Size: uint64(size)}); err != nil {
		return err
	}
	n, err := io.CopyBuffer(h, resp.Body, buf)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	got, err := h.Sum()
	if err == nil && (n != size || got != ref) {
		err = fmt.Errorf("GET %s: %d bytes hashing to %s, want %d bytes of %s", url, n, got, size, ref)
	}
	return err
}

// getURLs gives, for a reference, the URL of its bytes on the amduat
// server (side 1) and on the file server (side 0).
func getURLs(srv, files string, ref asl.Reference) [2]string {
	return [2]string{files + "/f/" + ref.String(), srv + "/v1/artifacts/" + ref.String()}
}

// getChunks is how many pieces each side's pass of the 1 KiB GETs is cut
// into, the pieces of the two sides alternating ABBA: this machine's CPUs
// are virtual, and the host takes them away in bursts (stalls of 10-35 ms,
// about every 100 ms, for a second or two), so one whole pass per side
// would charge a burst to whichever side it fell on (BENCHMARKS.md,
// "get-vs-files").
const getChunks = 100

// serverVsFiles measures GETs of the small artifacts (the first set of
// serverSmall, rewritten as files) with 1 and 16 clients and of the large
// artifact of serverLargeInProcess, through the amduat server at srvURL
// and through the file server, alternating which side goes first.
func serverVsFiles(ctx context.Context, e *Env, dir, srvURL string, large asl.Reference) ([]Row, error) {
	fdir := filepath.Join(dir, "files")
	if err := os.MkdirAll(fdir, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(fdir)
	n, size := e.Sizes.SmallCount, e.Sizes.SmallSize
	e.logf("server: writing the %d small artifacts and the large one as files for the file server", n)
	refs := make([]asl.Reference, n)
	p := make([]byte, size)
	for i := range refs {
		FillRandom(p, serverSeed, uint64(i)) // serverSmall's first set
		ref, err := asl.Derive(asl.HashSHA256, asl.Untagged(p))
		if err != nil {
			return nil, err
		}
		refs[i] = ref
		if err := os.WriteFile(filepath.Join(fdir, ref.String()), p, 0o644); err != nil {
			return nil, err
		}
	}
	if err := writeStream(filepath.Join(fdir, large.String()), NewStream(Random, serverSeed, e.Sizes.LargeBytes)); err != nil {
		return nil, err
	}
	fs, err := startFileServer(fdir)
	if err != nil {
		return nil, err
	}
	defer fs.close()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	names := [2]string{"file server", "amduat server"}

	order := rand.New(rand.NewPCG(serverSeed, 2)).Perm(n)
	var rows []Row
	for k, c := range []int{1, 16} {
		var (
			res   [2]pool
			steal [2]time.Duration
		)
		hs := make([]*asl.Hasher, c)
		bufs := make([][]byte, c)
		for w := range hs {
			hs[w], bufs[w] = &asl.Hasher{}, make([]byte, 32<<10)
		}
		e.logf("server: GET of %d x %d B from the file server and the amduat server, %d clients, in %d alternating chunks", n, size, c, getChunks)
		chunk := (n + getChunks - 1) / getChunks
		last, stealOK := hostSteal()
		for ch := 0; ch*chunk < n; ch++ {
			lo, hi := ch*chunk, min(n, (ch+1)*chunk)
			for i := range 2 {
				si := (i + ch + k) % 2
				var (
					p   pool
					err error
				)
				phase(ctx, "get-vs-files-"+[2]string{"files", "server"}[si], func(ctx context.Context) {
					p, err = runPool(c, hi-lo, func(w, j int) error {
						ref := refs[order[lo+j]]
						return verifiedGet(ctx, client, getURLs(srvURL, fs.url, ref)[si], ref, int64(size), hs[w], bufs[w])
					}, nil)
				})
				if err != nil {
					return nil, fmt.Errorf("server/get-vs-files-c%d: %s, requests %d to %d: %w", c, names[si], lo, hi, err)
				}
				now, ok := hostSteal()
				steal[si] += now - last
				last, stealOK = now, stealOK && ok
				res[si] = res[si].plus(p)
			}
		}
		stealText := ""
		if stealOK {
			stealText = fmt.Sprintf("; CPU time the host took from this machine's CPUs during the passes (/proc/stat steal): server %s, file server %s", steal[1], steal[0])
		}
		rows = append(rows, Row{
			Name:     fmt.Sprintf("server/get-vs-files-c%d", c),
			Figure:   Quantity{perSec(n, res[1].d), "artifacts/s"},
			Baseline: &Baseline{perSec(n, res[0].d), "artifacts/s", fmt.Sprintf("net/http file server, same bytes, %d client(s)", c)},
			Target:   &Target{">= 1.0x baseline", OnRatio, AtLeast, 1.0},
			Note: fmt.Sprintf("GET of all %d x %d B in a shuffled order, %d client goroutine(s) sharing one net/http client, the same client code on both sides (body read to EOF and hashed to its reference), in %d chunks of %d alternating between the sides (ABBA); the amduat server's GET /v1/artifacts/REF (verified by the store) against http.ServeContent of a file per artifact: server %s (%s, p999 %s ms), file server %s (%s, p999 %s ms)%s",
				n, size, c, getChunks, chunk, res[1].d.Round(time.Millisecond), res[1].latText(), formatValue(res[1].pct(99.9)), res[0].d.Round(time.Millisecond), res[0].latText(), formatValue(res[0].pct(99.9)), stealText),
		})
	}

	// The large artifact: alternating, twice each, the faster of each.
	lsize := e.Sizes.LargeBytes
	var best [2]time.Duration
	var all [2][]time.Duration
	h, buf := &asl.Hasher{}, make([]byte, 256<<10)
	for _, si := range []int{1, 0, 1, 0} {
		e.logf("server: GET of %s from the %s", sizeText(lsize), names[si])
		start := time.Now()
		var err error
		phase(ctx, "large-get-vs-files-"+[2]string{"files", "server"}[si], func(ctx context.Context) {
			err = verifiedGet(ctx, client, getURLs(srvURL, fs.url, large)[si], large, lsize, h, buf)
		})
		d := time.Since(start)
		if err != nil {
			return nil, fmt.Errorf("server/large-get-vs-files: %s: %w", names[si], err)
		}
		all[si] = append(all[si], d)
		if best[si] == 0 || d < best[si] {
			best[si] = d
		}
	}
	rows = append(rows, Row{
		Name:     "server/large-get-vs-files",
		Figure:   Quantity{mibPerSec(lsize, best[1]), "MiB/s"},
		Baseline: &Baseline{mibPerSec(lsize, best[0]), "MiB/s", "net/http file server, same bytes"},
		Target:   &Target{">= 0.95x baseline", OnRatio, AtLeast, 0.95},
		Note: fmt.Sprintf("GET of the %s random artifact of server/large-get read to EOF and hashed to its reference by the same client code on both sides; the amduat server (checking each chunk as it reads, the digest left to the client, which says it checks it: X-Amduat-Verify) against http.ServeContent of a file of the same bytes (sendfile), alternating, twice each, the faster of each: server %s / %s, file server %s / %s",
			sizeText(lsize), all[1][0].Round(time.Millisecond), all[1][1].Round(time.Millisecond), all[0][0].Round(time.Millisecond), all[0][1].Round(time.Millisecond)),
	})
	return rows, nil
}
