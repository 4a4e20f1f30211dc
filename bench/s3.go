package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/asl/s3store"
	"github.com/amduat/amduat/asl/s3store/miniotest"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/report"
	"github.com/amduat/amduat/surf"
)

// The s3 group measures asl/s3store (SPECS.md §6.7) against a MinIO server
// it starts on loopback (found on PATH or in $(go env GOPATH)/bin; without
// one every row is skipped with a note), each figure beside the raw
// minio-go client doing the same requests on the same server and bytes in
// the same run:
//
//   - put-batch: 1 KiB artifacts by PutBatch of 256 (one object each, 16
//     PUTs in flight) against raw PutObject of the same ArtifactBytes, 16
//     goroutines;
//   - get-random: Get (one GET, verified) of each in a shuffled order
//     against raw GetObject and a read to EOF;
//   - large-put, large-get: one large artifact streamed (parts uploaded in
//     parallel, then a manifest) and read verified, against raw PutObject
//     (the same part size) and GetObject of the same bytes, alternating,
//     best of s3LargeReps each;
//   - run-p50, run-p99: fresh surface runs (NoCache) on the S3 store
//     against the same runs on an embedded store, interleaved (target of
//     run-p50: at most 3x, issue 24);
//   - run-floor-p50: the rounds of requests such a run must wait for, sent
//     by the raw client (s3Floor), against the same embedded p50;
//   - run-one-round-floor-p50: the same PUTs in one round;
//   - cache-hit-p50: a run through one `amduat serve --store s3://…`
//     process, then the same run through a second one on the same bucket,
//     which must answer it from the action cache; the hit is timed,
//     against an action-cache hit on the embedded store;
//   - cache-hit-floor-p50: the rounds such a hit must wait for, raw.
const (
	s3Seed     = 8
	s3Batch    = 256
	s3Parallel = 16
	// s3SmallMax and s3LargeMax cap the sizes: every small artifact is an
	// object and a request, and MinIO on the same machine writes each.
	s3SmallMax = 4096
	s3LargeMax = 1 << 30
	// s3LargeReps is how many times each large transfer runs.
	s3LargeReps = 3
)

var s3RowNames = []string{"put-batch", "get-random", "large-put", "large-get", "run-p50", "run-p99", "run-floor-p50", "run-one-round-floor-p50", "cache-hit-p50", "cache-hit-floor-p50"}

func runS3(ctx context.Context, e *Env) ([]Row, error) {
	dir, err := e.tempDir("s3")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	m, err := miniotest.Launch(dir)
	if err == miniotest.ErrNotInstalled {
		var rows []Row
		for _, n := range s3RowNames {
			rows = append(rows, Row{Name: "s3/" + n, Skipped: true, Note: miniotest.SkipMessage})
		}
		return rows, nil
	}
	if err != nil {
		return nil, err
	}
	defer m.Stop()
	opts := s3store.Options{Endpoint: m.Endpoint, Insecure: true, PathStyle: true,
		AccessKey: m.AccessKey, SecretKey: m.SecretKey, Parallel: s3Parallel}
	st, err := s3store.Create(ctx, "bench", "s", opts)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	cl := st.Client()
	var rows []Row

	n := min(e.Sizes.SmallCount, s3SmallMax)
	size := e.Sizes.SmallSize
	rng := rand.New(rand.NewPCG(s3Seed, 1))
	arts := make([]asl.Artifact, n)
	for i := range arts {
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		arts[i] = asl.Untagged(b)
	}
	// Store side.
	e.logf("s3: PutBatch of %d x %d B", n, size)
	t0 := time.Now()
	var refs []asl.Reference
	q0 := st.Stats()
	phase(ctx, "s3-put-batch", func(ctx context.Context) {
		for lo := 0; lo < n && err == nil; lo += s3Batch {
			var r []asl.Reference
			r, err = st.PutBatch(ctx, asl.HashSHA256, arts[lo:min(lo+s3Batch, n)])
			refs = append(refs, r...)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("s3/put-batch: %w", err)
	}
	dStore := time.Since(t0)
	qPut := st.Stats().Sub(q0)
	// Raw side: the same bytes as objects under other keys.
	e.logf("s3: raw PutObject of %d x %d B", n, size)
	raw, err := runPool(s3Parallel, n, func(_, j int) error {
		b := asl.EncodeArtifact(arts[j])
		_, err := cl.PutObject(ctx, "bench", fmt.Sprintf("raw/%d", j), bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{DisableMultipart: true})
		return err
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("s3/put-batch: raw: %w", err)
	}
	embPut, embGet, err := s3Embedded(ctx, dir, arts)
	if err != nil {
		return nil, err
	}
	rows = append(rows, Row{
		Name:     "s3/put-batch",
		Figure:   Quantity{perSec(n, dStore), "artifacts/s"},
		Baseline: &Baseline{perSec(n, raw.d), "artifacts/s", fmt.Sprintf("raw minio-go PutObject of the same ArtifactBytes, %d goroutines", s3Parallel)},
		Note: fmt.Sprintf("%s; %d x %d B random artifacts, PutBatch of %d (one conditional PUT each, %d in flight); MinIO on loopback on this machine; store %s, raw %s (%s); the embedded store, same batches: %s artifacts/s",
			requestsText(qPut, n, "artifact"), n, size, s3Batch, s3Parallel, dStore.Round(time.Millisecond), raw.d.Round(time.Millisecond), raw.latText(), formatValue(perSec(n, embPut))),
	})

	order := rand.New(rand.NewPCG(s3Seed, 2)).Perm(n)
	buf := make([]byte, 0, size+16)
	e.logf("s3: Get of %d x %d B", n, size)
	q0 = st.Stats()
	got, err := runPool(1, n, func(_, j int) error {
		_, err := asl.Get(ctx, st, refs[order[j]], 0)
		return err
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("s3/get-random: %w", err)
	}
	qGet := st.Stats().Sub(q0)
	rawGet, err := runPool(1, n, func(_, j int) error {
		obj, err := cl.GetObject(ctx, "bench", fmt.Sprintf("raw/%d", order[j]), minio.GetObjectOptions{})
		if err != nil {
			return err
		}
		defer obj.Close()
		buf = buf[:0]
		_, err = io.Copy(bytes.NewBuffer(buf), obj)
		return err
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("s3/get-random: raw: %w", err)
	}
	rows = append(rows, Row{
		Name:     "s3/get-random",
		Figure:   Quantity{perSec(n, got.d), "artifacts/s"},
		Baseline: &Baseline{perSec(n, rawGet.d), "artifacts/s", "raw minio-go GetObject of the same objects, read to EOF"},
		Note: fmt.Sprintf("%s; each of the %d once in a shuffled order, one client, verified; store %s, raw %s; the embedded store, same order: %s artifacts/s",
			requestsText(qGet, n, "artifact"), n, got.latText(), rawGet.latText(), formatValue(perSec(n, embGet))),
	})

	// Large.
	large, err := s3Large(ctx, e, st, m.PID())
	if err != nil {
		return nil, err
	}
	rows = append(rows, large...)
	runs, err := s3Runs(ctx, e, st, opts, dir)
	if err != nil {
		return nil, err
	}
	rows = append(rows, runs...)
	floor, err := s3FloorRow(ctx, e, cl, "run-floor-p50", s3RunRounds, runs[0].Baseline,
		"a NoCache run waits for them: its artifacts, then its index entries, written only once the artifacts are acknowledged (SPECS.md §6.5); its one GET, the salt, goes while it computes")
	if err != nil {
		return nil, err
	}
	rows = append(rows, floor)
	if floor, err = s3FloorRow(ctx, e, cl, "run-one-round-floor-p50", s3RunOneRound, runs[0].Baseline,
		"the objects of a NoCache run all at once, as it would send them if its index entries did not wait for its artifacts (§6.5): what this MinIO takes to make that many objects durable, in whatever order"); err != nil {
		return nil, err
	}
	rows = append(rows, floor)
	hit, err := s3CacheHit(ctx, e, m, dir)
	if err != nil {
		return nil, err
	}
	rows = append(rows, hit)
	if floor, err = s3FloorRow(ctx, e, cl, "cache-hit-floor-p50", s3HitRounds, hit.Baseline,
		"an action-cache hit through a server that has read the salt waits for them: salt and action entry, then result, trace and output, which the entry names (§14.6 answers only from intact bytes), then the run log's entry (§19.7)"); err != nil {
		return nil, err
	}
	return append(rows, floor), nil
}

// s3FloorRow is the row of s3Floor: the p50 of the rounds against the
// embedded p50 of the operation they belong to (base, nil when that row
// was skipped).
func s3FloorRow(ctx context.Context, e *Env, cl *minio.Client, name string, rounds []s3Round, base *Baseline, why string) (Row, error) {
	samples := e.Sizes.SurfaceRuns
	e.logf("s3: %s: %d times %s, raw", name, samples, roundsText(rounds))
	ds, err := s3Floor(ctx, cl, name, rounds, samples)
	if err != nil {
		return Row{}, err
	}
	r := Row{Name: "s3/" + name, Figure: Quantity{percentileMS(ds, 50), "ms"},
		Note: fmt.Sprintf("the least the operation can take on this MinIO: %s of 1 KiB objects, each round's requests at once and the rounds one after another, by the raw minio-go client, %d times (p99 %s ms); %s; the baseline is the embedded p50 of the S3 row before it, so this ratio is the least that row's ratio can be on this machine",
			roundsText(rounds), samples, formatValue(percentileMS(ds, 99)), why)}
	if base != nil {
		b := *base
		r.Baseline = &b
	}
	return r, nil
}

// blockReader yields n pseudo-random bytes without holding them: a 1 MiB
// random block repeated, each repetition stamped with its index and a
// variant (so no two parts are equal and a new variant is a new artifact).
type blockReader struct {
	block   []byte
	n, off  int64
	variant uint64
}

func newBlockReader(block []byte, n int64, variant uint64) *blockReader {
	return &blockReader{block: block, n: n, variant: variant}
}

func (b *blockReader) Read(p []byte) (int, error) {
	if b.off >= b.n {
		return 0, io.EOF
	}
	bs := int64(len(b.block))
	in := b.off % bs
	k := min(int64(len(p)), bs-in, b.n-b.off)
	copy(p[:k], b.block[in:in+k])
	if in < 16 {
		var stamp [16]byte
		binary.LittleEndian.PutUint64(stamp[:], uint64(b.off/bs))
		binary.LittleEndian.PutUint64(stamp[8:], b.variant)
		copy(p[:k], stamp[in:min(16, in+k)])
	}
	b.off += k
	return int(k), nil
}

// s3Large: a large artifact put and read through the store against raw
// PutObject/GetObject of the same bytes, alternating, s3LargeReps times,
// the best of each reported with the peak RSS of its window.
func s3Large(ctx context.Context, e *Env, st *s3store.Store, minioPID int) ([]Row, error) {
	cl := st.Client()
	lsize := min(e.Sizes.LargeBytes, s3LargeMax)
	block := make([]byte, 1<<20)
	FillRandom(block, s3Seed, 3)
	hdr := asl.Header{Size: uint64(lsize)}
	// best keeps the fastest run of f, with the peak RSS of all runs and
	// the CPU time that this process and MinIO spent in the fastest run.
	best := func(d *time.Duration, rss **int64, cpu *s3CPU, f func() error) error {
		w := StartWindow()
		c0 := readS3CPU(minioPID)
		t0 := time.Now()
		err := f()
		dt := time.Since(t0)
		c := readS3CPU(minioPID).sub(c0)
		r, _ := w.Stop()
		if err == nil && (*d == 0 || dt < *d) {
			*d, *cpu = dt, c
		}
		if r != nil && (*rss == nil || *r > **rss) {
			*rss = r
		}
		return err
	}
	var cPut, cRawPut, cGet, cRawGet s3CPU
	var dPut, dRawPut, dGet, dRawGet time.Duration
	var rssPut, rssRawPut, rssGet, rssRawGet *int64
	var ref asl.Reference
	var qPut, qGet s3store.Stats
	reps := e.reps(s3LargeReps)
	e.logf("s3: large put and get of %d MiB, %d times each, alternating with the raw client", lsize>>20, reps)
	for rep := range reps {
		err := best(&dPut, &rssPut, &cPut, func() error {
			var err error
			q0 := st.Stats()
			ref, err = st.Put(ctx, asl.HashSHA256, hdr, newBlockReader(block, lsize, uint64(rep)))
			qPut = qPut.Add(st.Stats().Sub(q0))
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("s3/large-put: %w", err)
		}
		err = best(&dRawPut, &rssRawPut, &cRawPut, func() error {
			_, err := cl.PutObject(ctx, "bench", "raw/large", newBlockReader(block, lsize, uint64(rep)), lsize,
				minio.PutObjectOptions{PartSize: s3store.DefaultPartSize, NumThreads: 1})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("s3/large-put: raw: %w", err)
		}
		err = best(&dGet, &rssGet, &cGet, func() error {
			q0 := st.Stats()
			defer func() { qGet = qGet.Add(st.Stats().Sub(q0)) }()
			rc, _, err := st.Fetch(ctx, ref)
			if err != nil {
				return err
			}
			defer rc.Close()
			n, err := io.Copy(io.Discard, rc)
			if err == nil && n != lsize {
				err = fmt.Errorf("read %d bytes of %d", n, lsize)
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("s3/large-get: %w", err)
		}
		err = best(&dRawGet, &rssRawGet, &cRawGet, func() error {
			obj, err := cl.GetObject(ctx, "bench", "raw/large", minio.GetObjectOptions{})
			if err != nil {
				return err
			}
			defer obj.Close()
			_, err = io.Copy(io.Discard, obj)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("s3/large-get: raw: %w", err)
		}
	}
	mibps := func(d time.Duration) float64 { return float64(lsize) / mib / d.Seconds() }
	rssText := func(r *int64) string {
		if r == nil {
			return "?"
		}
		return fmt.Sprintf("%d MiB", *r>>20)
	}
	return []Row{
		{
			Name:     "s3/large-put",
			Figure:   Quantity{mibps(dPut), "MiB/s"},
			Baseline: &Baseline{mibps(dRawPut), "MiB/s", "raw minio-go PutObject of the same bytes, same part size, streamed"},
			PeakRSS:  rssPut,
			Note: fmt.Sprintf("%s; %d MiB streamed from a generator (no copy held), best of %d: %d MiB parts, each hashed and PUT (up to 3 in flight) under its digest, then the manifest; raw peak RSS %s; %s",
				requestsText(qPut, reps, "put"), lsize>>20, reps, s3store.DefaultPartSize>>20, rssText(rssRawPut), cpuText(cPut, cRawPut, lsize)),
		},
		{
			Name:     "s3/large-get",
			Figure:   Quantity{mibps(dGet), "MiB/s"},
			Baseline: &Baseline{mibps(dRawGet), "MiB/s", "raw minio-go GetObject of the same bytes, read to EOF"},
			PeakRSS:  rssGet,
			Note: fmt.Sprintf("%s; %d MiB, best of %d: the parts' GETs opened 3 ahead, received on one goroutine, every byte SHA-256 verified on the reading one; raw peak RSS %s; %s",
				requestsText(qGet, reps, "get"), lsize>>20, reps, rssText(rssRawGet), cpuText(cGet, cRawGet, lsize)),
		},
	}, nil
}

// s3CPU is CPU time spent by this process (the client) and by MinIO.
type s3CPU struct {
	client, server time.Duration
	serverOK       bool
}

func readS3CPU(minioPID int) s3CPU {
	c := s3CPU{client: processCPU()}
	if minioPID > 0 {
		c.server, c.serverOK = pidCPU(minioPID)
	}
	return c
}

func (c s3CPU) sub(o s3CPU) s3CPU {
	return s3CPU{client: c.client - o.client, server: c.server - o.server, serverOK: c.serverOK && o.serverOK}
}

// cpuText compares the CPU per MiB of the store's and the raw client's
// fastest runs over n bytes: on a machine whose cores are all busy (MinIO
// runs on the same ones), what each side spends per MiB, not the
// store's code alone, sets the ratio of the rates.
func cpuText(store, raw s3CPU, n int64) string {
	perMiB := func(d time.Duration) string { return formatValue(d.Seconds()*1e3/(float64(n)/mib)) + " ms" }
	side := func(c s3CPU) string {
		t := "client " + perMiB(c.client)
		if c.serverOK {
			t += ", MinIO " + perMiB(c.server)
		}
		return t
	}
	return "CPU per MiB: store " + side(store) + "; raw " + side(raw)
}

// s3Runs times fresh surface runs (NoCache) on the S3 store against the
// same runs on an embedded store, interleaved. The S3 side is a second
// handle on st's bucket and prefix with the memory cache `amduat serve`
// has (s3store.DefaultMemCacheSize): its inputs are put through it before
// each run, as a client puts them through a server before it runs.
func s3Runs(ctx context.Context, e *Env, st *s3store.Store, opts s3store.Options, dir string) ([]Row, error) {
	opts.MemCacheSize = s3store.DefaultMemCacheSize
	st, err := s3store.Open(ctx, st.Bucket(), st.Prefix(), opts)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	emb, err := pebblestore.Create(filepath.Join(dir, "emb-runs"), nil)
	if err != nil {
		return nil, err
	}
	defer emb.Close()
	prog, err := pel.ProgramArtifact(SurfaceProgram())
	if err != nil {
		return nil, err
	}
	progRef, err := asl.PutArtifact(ctx, emb, asl.HashSHA256, prog)
	if err != nil {
		return nil, err
	}
	if _, err := asl.PutArtifact(ctx, st, asl.HashSHA256, prog); err != nil {
		return nil, err
	}
	runs := e.Sizes.SurfaceRuns
	e.logf("s3: %d fresh runs of a %d-node program on the S3 store and on an embedded one, interleaved", runs, len(SurfaceProgram().Nodes))
	sides := []asl.Store{st, emb}
	d := [2][]time.Duration{}
	var q s3store.Stats
	w := StartWindow()
	for i := range runs {
		ins := surfaceInputs(2_000_000 + i)
		var refs []asl.Reference
		for _, s := range sides {
			if refs, err = s.(asl.BatchReceiver).PutBatch(ctx, asl.HashSHA256, ins); err != nil {
				return nil, err
			}
		}
		var results [2]asl.Reference
		for k := range 2 {
			side := (i + k) % 2
			q0 := st.Stats()
			t := time.Now()
			var run *surf.Run
			phase(ctx, []string{"run-s3", "run-embedded"}[side], func(ctx context.Context) {
				run, err = surf.New(sides[side], surf.Options{NoCache: true}).Run(ctx, surf.Request{ProgramRef: progRef, InputRefs: refs})
			})
			d[side] = append(d[side], time.Since(t))
			if side == 0 {
				q = q.Add(st.Stats().Sub(q0))
			}
			if err != nil {
				return nil, err
			}
			if run.Result.Value.Status != pel.StatusOK {
				return nil, fmt.Errorf("s3 run: status %s", run.Result.Value.Status)
			}
			results[side] = run.ResultRef
		}
		if results[0] != results[1] {
			return nil, fmt.Errorf("run %d: result %s on S3, %s embedded", i, results[0], results[1])
		}
	}
	rss, _ := w.Stop()
	return []Row{
		{
			Name: "s3/run-p50", Figure: Quantity{percentileMS(d[0], 50), "ms"},
			Baseline: &Baseline{percentileMS(d[1], 50), "ms", "embedded surf.Surface.Run, p50"},
			Target:   &Target{"<= 3x baseline", OnRatio, AtMost, 3},
			PeakRSS:  rss,
			Note: fmt.Sprintf("%s; %d runs (NoCache, fresh 1 KiB inputs each, put through the same store before the run) of the surface group's %d-node program with surf.Surface.Run on the S3 store (memory cache of %d MiB, as `amduat serve`) against the embedded store, alternating which goes first; results checked equal",
				requestsText(q, runs, "run"), runs, len(SurfaceProgram().Nodes), s3store.DefaultMemCacheSize>>20),
		},
		{
			Name: "s3/run-p99", Figure: Quantity{percentileMS(d[0], 99), "ms"},
			Baseline: &Baseline{percentileMS(d[1], 99), "ms", "embedded surf.Surface.Run, p99"},
			PeakRSS:  rss,
			Note:     fmt.Sprintf("%s; same runs; max %s ms on S3, %s ms embedded", requestsText(q, runs, "run"), formatValue(percentileMS(d[0], 100)), formatValue(percentileMS(d[1], 100))),
		},
	}, nil
}

// s3CacheHit starts two `amduat serve --store s3://…` processes on one
// bucket prefix; each run goes through the first (a miss, stored) and then
// through the second, which must answer from the action cache; the hits
// are timed against action-cache hits on an embedded store.
func s3CacheHit(ctx context.Context, e *Env, m *miniotest.Server, dir string) (Row, error) {
	row := Row{Name: "s3/cache-hit-p50", Figure: Quantity{0, "ms"}}
	if e.AmduatBin == "" {
		row.Skipped, row.Note = true, "no amduat executable to run `amduat serve`"
		return row, nil
	}
	if _, err := s3store.Create(ctx, "bench", "srv", s3store.Options{Endpoint: m.Endpoint, Insecure: true, PathStyle: true,
		AccessKey: m.AccessKey, SecretKey: m.SecretKey}); err != nil {
		return row, err
	}
	url := fmt.Sprintf("s3://bench/srv?endpoint=%s&insecure=1&path-style=1", m.Endpoint)
	env := []string{"AWS_ACCESS_KEY_ID=" + m.AccessKey, "AWS_SECRET_ACCESS_KEY=" + m.SecretKey}
	var procs [2]*serveProc
	var clients [2]*httpstore.Client
	stopped := false
	defer func() {
		for _, p := range procs {
			if p != nil && !stopped {
				p.stop()
			}
		}
	}()
	for k := range procs {
		p, err := startServeEnv(ctx, e.AmduatBin, url, env)
		if err != nil {
			return row, err
		}
		procs[k] = p
		if clients[k], err = httpstore.Open(ctx, p.url, httpstore.Options{}); err != nil {
			return row, err
		}
	}
	emb, err := pebblestore.Create(filepath.Join(dir, "emb-cache"), nil)
	if err != nil {
		return row, err
	}
	defer emb.Close()
	cached := surf.New(emb, surf.Options{})
	prog, err := pel.ProgramArtifact(SurfaceProgram())
	if err != nil {
		return row, err
	}
	progRef, err := asl.PutArtifact(ctx, emb, asl.HashSHA256, prog)
	if err != nil {
		return row, err
	}
	if _, err := asl.PutArtifact(ctx, clients[0], asl.HashSHA256, prog); err != nil {
		return row, err
	}
	runs := e.Sizes.SurfaceRuns
	e.logf("s3: %d runs through one `amduat serve --store s3://` and their action-cache hits through a second", runs)
	var dHit, dEmb, dMiss []time.Duration
	var last surf.Request
	for i := range runs {
		ins := surfaceInputs(3_000_000 + i)
		refs, err := clients[0].PutBatch(ctx, asl.HashSHA256, ins)
		if err != nil {
			return row, err
		}
		req := report.RunRequest{ProgramRef: progRef, InputRefs: refs}
		var first, second report.Run
		t := time.Now()
		if err := clients[0].DoJSON(ctx, http.MethodPost, "/v1/pel/run", true, req, &first); err != nil {
			return row, fmt.Errorf("run through the first server: %w", err)
		}
		dMiss = append(dMiss, time.Since(t))
		t = time.Now()
		if err := clients[1].DoJSON(ctx, http.MethodPost, "/v1/pel/run", true, req, &second); err != nil {
			return row, fmt.Errorf("run through the second server: %w", err)
		}
		dHit = append(dHit, time.Since(t))
		if first.Cache != report.CacheMiss || second.Cache != report.CacheHit || second.ResultRef != first.ResultRef {
			return row, fmt.Errorf("run %d: first %s %s, through the second server %s %s; want a miss then a hit of the same result",
				i, first.Cache, first.ResultRef, second.Cache, second.ResultRef)
		}
		if _, err := emb.PutBatch(ctx, asl.HashSHA256, ins); err != nil {
			return row, err
		}
		sreq := surf.Request{ProgramRef: progRef, InputRefs: refs}
		last = sreq
		if r, err := cached.Run(ctx, sreq); err != nil || r.CacheHit {
			return row, fmt.Errorf("embedded first run: %v", err)
		}
		t = time.Now()
		r, err := cached.Run(ctx, sreq)
		dEmb = append(dEmb, time.Since(t))
		if err != nil || !r.CacheHit || r.ResultRef != first.ResultRef {
			return row, fmt.Errorf("embedded cache hit: %v", err)
		}
	}
	// The servers' requests are not visible from here: the same hit
	// through a fresh in-process store on the bucket (a third server, as
	// `amduat serve` opens it) is counted instead.
	q, err := s3HitRequests(ctx, m, last)
	if err != nil {
		return row, err
	}
	var peak *int64
	stopped = true
	for _, p := range procs {
		if r, err := p.stop(); err == nil && r != nil && (peak == nil || *r > *peak) {
			peak = r
		}
	}
	row.Figure.Value = percentileMS(dHit, 50)
	row.Baseline = &Baseline{percentileMS(dEmb, 50), "ms", "action-cache hit of surf.Surface.Run on an embedded store, p50"}
	row.PeakRSS = peak
	row.Note = fmt.Sprintf("%s (the last request's hit through a fresh in-process store on the bucket, opened as `amduat serve` opens it); %d runs (fresh 1 KiB inputs) through POST /v1/pel/run of one `amduat serve --store s3://` process (a miss: p50 %s ms), then the same request through a second process on the same bucket: an action-cache hit every time, same result; hit p99 %s ms; peak RSS is the larger server's",
		requestsText(q, 1, "hit"), runs, formatValue(percentileMS(dMiss, 50)), formatValue(percentileMS(dHit, 99)))
	return row, nil
}

// s3Embedded times the small rows' work on an embedded store: PutBatch of
// the same artifacts in the same batches, then a Get of each in the same
// shuffled order as the S3 row.
func s3Embedded(ctx context.Context, dir string, arts []asl.Artifact) (put, get time.Duration, err error) {
	emb, err := pebblestore.Create(filepath.Join(dir, "emb"), nil)
	if err != nil {
		return 0, 0, err
	}
	defer emb.Close()
	n := len(arts)
	t0 := time.Now()
	var refs []asl.Reference
	for lo := 0; lo < n; lo += s3Batch {
		r, err := emb.PutBatch(ctx, asl.HashSHA256, arts[lo:min(lo+s3Batch, n)])
		if err != nil {
			return 0, 0, err
		}
		refs = append(refs, r...)
	}
	put = time.Since(t0)
	order := rand.New(rand.NewPCG(s3Seed, 2)).Perm(n)
	t0 = time.Now()
	for _, j := range order {
		if _, err := asl.Get(ctx, emb, refs[j], 0); err != nil {
			return 0, 0, err
		}
	}
	return put, time.Since(t0), nil
}

// requestsText is the object-store requests of n operations (s3store's
// Stats, SPECS.md §6.7, "Requests per operation"): "requests: R per OP
// (…)", R the mean, followed by the total by method.
func requestsText(q s3store.Stats, n int, op string) string {
	if n <= 0 {
		return "requests: n.a."
	}
	return fmt.Sprintf("requests: %s per %s (%s in all)", formatValue(float64(q.Total())/float64(n)), op, q)
}

// s3HitRequests counts the object-store requests of req's action-cache hit
// through a store opened afresh on the bench's server bucket, with the
// options `amduat serve` gives it.
func s3HitRequests(ctx context.Context, m *miniotest.Server, req surf.Request) (s3store.Stats, error) {
	st, err := s3store.Open(ctx, "bench", "srv", s3store.Options{Endpoint: m.Endpoint, Insecure: true, PathStyle: true,
		AccessKey: m.AccessKey, SecretKey: m.SecretKey, MemCacheSize: s3store.DefaultMemCacheSize})
	if err != nil {
		return s3store.Stats{}, err
	}
	defer st.Close()
	q0 := st.Stats()
	r, err := surf.New(st, surf.Options{}).Run(ctx, req)
	if err != nil {
		return s3store.Stats{}, err
	}
	if !r.CacheHit {
		return s3store.Stats{}, fmt.Errorf("s3/cache-hit: the run through a fresh store was no action-cache hit")
	}
	return st.Stats().Sub(q0), nil
}
