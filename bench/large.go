package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/klauspost/compress/zstd"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
)

// largeSeed seeds the large artifacts (the kind selects the stream too).
const largeSeed = 1

// streamBuf is the read size of the hash passes: the store's chunk size, so
// the baseline reads the generator exactly as Put does.
const streamBuf = pebblestore.DefaultChunkSize

// HashPass is one pass of SHA-256 (the Reference derivation, ArtifactBytes
// header included) over a generated stream.
type HashPass struct {
	Ref   asl.Reference
	Total time.Duration // generating and hashing, as Put reads and hashes
	Gen   time.Duration // generating alone
	Hash  time.Duration // hashing alone
}

// HashStream generates the stream (kind, seed, size) in chunks of the store's
// chunk size and derives its Reference, timing generation and hashing
// separately. Only one chunk is held.
func HashStream(kind Kind, seed uint64, size int64) (HashPass, error) {
	hdr := asl.Header{Size: uint64(size)}
	buf := make([]byte, streamBuf)
	r := NewStream(kind, seed, size)
	start := time.Now()
	h, err := asl.NewHasher(asl.HashSHA256, hdr)
	if err != nil {
		return HashPass{}, err
	}
	var p HashPass
	for left := size; left > 0; {
		n := int(min(int64(len(buf)), left))
		t0 := time.Now()
		if _, err := io.ReadFull(r, buf[:n]); err != nil {
			return HashPass{}, err
		}
		t1 := time.Now()
		h.Write(buf[:n])
		p.Gen += t1.Sub(t0)
		p.Hash += time.Since(t1)
		left -= int64(n)
	}
	if p.Ref, err = h.Sum(); err != nil {
		return HashPass{}, err
	}
	p.Total = time.Since(start)
	return p, nil
}

// PutLarge streams the stream (kind, seed, size) into s with Put and returns
// its reference and the time until Put returned (the artifact is durable).
func PutLarge(ctx context.Context, s asl.Receiver, kind Kind, seed uint64, size int64) (asl.Reference, time.Duration, error) {
	start := time.Now()
	ref, err := s.Put(ctx, asl.HashSHA256, asl.Header{Size: uint64(size)}, NewStream(kind, seed, size))
	return ref, time.Since(start), err
}

// GetLarge fetches ref and reads it to the end (the store verifies every
// chunk and the digest), returning the time taken.
func GetLarge(ctx context.Context, s asl.Fetcher, ref asl.Reference, size int64) (time.Duration, error) {
	start := time.Now()
	rc, hdr, err := s.Fetch(ctx, ref)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(io.Discard, rc)
	rc.Close()
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	if n != size || hdr.Size != uint64(size) {
		return 0, fmt.Errorf("fetch %s: read %d bytes, header says %d, want %d", ref, n, hdr.Size, size)
	}
	return d, nil
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// ZstdSize compresses the whole stream (kind, seed, size) with zstd's
// fastest level (klauspost/compress, streaming encoder, default window) and
// returns the compressed size and the time taken, generation included.
func ZstdSize(kind Kind, seed uint64, size int64) (int64, time.Duration, error) {
	c := &countWriter{}
	start := time.Now()
	z, err := zstd.NewWriter(c, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		return 0, 0, err
	}
	if _, err := io.CopyBuffer(z, NewStream(kind, seed, size), make([]byte, streamBuf)); err != nil {
		return 0, 0, err
	}
	if err := z.Close(); err != nil {
		return 0, 0, err
	}
	return c.n, time.Since(start), nil
}

// largeGets is how many times the large rows get the artifact.
const largeGets = 3

// getPass is one timed get of a large artifact and the SHA-256 rate it is
// compared with.
type getPass struct {
	d          time.Duration
	rate, base float64 // MiB/s
}

// medianGet returns the get with the median ratio, and the lowest and
// highest ratios.
func medianGet(gets []getPass) (med getPass, lo, hi float64) {
	s := slices.Clone(gets)
	ratio := func(g getPass) float64 { return g.rate / g.base }
	slices.SortFunc(s, func(a, b getPass) int { return cmp.Compare(ratio(a), ratio(b)) })
	return s[len(s)/2], ratio(s[0]), ratio(s[len(s)-1])
}

// getTimes lists the durations of the gets.
func getTimes(gets []getPass) string {
	var b strings.Builder
	for k, g := range gets {
		if k > 0 {
			b.WriteString(", ")
		}
		b.WriteString(g.d.Round(time.Millisecond).String())
	}
	return b.String()
}

// rssTarget is the memory target for streaming a large artifact.
const rssTarget = 128

func runLarge(ctx context.Context, e *Env, kind Kind) ([]Row, error) {
	size := e.Sizes.LargeBytes
	dir, err := e.tempDir("large-" + kind.String())
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	s, err := pebblestore.Create(filepath.Join(dir, "store"), nil)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	name := "large-" + kind.String()
	label := sizeText(size) + " " + kind.String()

	// Hash passes before the put, between put and get, and after each get;
	// each figure is compared with the better of the two passes around it.
	pass := func(which string) (HashPass, *int64, error) {
		e.logf("%s: SHA-256 pass %s over %s", name, which, label)
		var p HashPass
		w := StartWindow()
		phase(ctx, "hash", func(context.Context) { p, err = HashStream(kind, largeSeed, size) })
		rss, _ := w.Stop()
		return p, rss, err
	}
	a, rssHash, err := pass("before the put")
	if err != nil {
		return nil, err
	}

	e.logf("%s: put %s", name, label)
	var (
		ref  asl.Reference
		dPut time.Duration
	)
	io0 := ReadIO()
	w := StartWindow()
	phase(ctx, "put", func(ctx context.Context) { ref, dPut, err = PutLarge(ctx, s, kind, largeSeed, size) })
	rssPut, _ := w.Stop()
	ioPut := ReadIO().Sub(io0)
	if err != nil {
		return nil, fmt.Errorf("put: %w", err)
	}
	if ref != a.Ref {
		return nil, fmt.Errorf("put returned %s, the hash pass derived %s", ref, a.Ref)
	}
	b, _, err := pass("after the put")
	if err != nil {
		return nil, err
	}

	// The disk's limit for the incompressible put: the same number of bytes
	// written durably to a plain file.
	var dDisk time.Duration
	if kind == Random {
		e.logf("%s: durable sequential write of %s to a plain file", name, label)
		phase(ctx, "disk", func(context.Context) { dDisk, err = DiskWrite(filepath.Join(dir, "plain"), size) })
		if err != nil {
			return nil, err
		}
	}

	// The get, largeGets times, each followed by a hash pass: each get is
	// compared with the better of the passes just before and after it, and
	// the median of these ratios is reported (the machine's load moves
	// single figures by tens of percent).
	var (
		gets   [largeGets]getPass
		rssGet *int64
		ioGet  IOCounters
		c      HashPass
	)
	prev := b
	for k := range gets {
		e.logf("%s: get %d/%d of %s", name, k+1, len(gets), label)
		var dGet time.Duration
		io0 := ReadIO()
		w := StartWindow()
		phase(ctx, "get", func(ctx context.Context) { dGet, err = GetLarge(ctx, s, ref, size) })
		rss, _ := w.Stop()
		if err != nil {
			return nil, fmt.Errorf("get: %w", err)
		}
		if k == 0 {
			ioGet = ReadIO().Sub(io0)
		}
		if rss != nil && (rssGet == nil || *rss > *rssGet) {
			rssGet = rss
		}
		if c, _, err = pass(fmt.Sprintf("after get %d/%d", k+1, len(gets))); err != nil {
			return nil, err
		}
		base := max(mibPerSec(size, prev.Hash), mibPerSec(size, c.Hash))
		gets[k] = getPass{d: dGet, rate: mibPerSec(size, dGet), base: base}
		prev = c
	}
	info, err := s.Stat(ctx, ref)
	if err != nil {
		return nil, err
	}

	putBase := max(mibPerSec(size, a.Total), mibPerSec(size, b.Total))
	med, lo, hi := medianGet(gets[:])
	putTarget, getTarget := 0.7, 0.95
	if kind == Text {
		putTarget, getTarget = 0.3, 0.8
	}
	put := Row{
		Name:     name + "/put",
		Figure:   Quantity{mibPerSec(size, dPut), "MiB/s"},
		Baseline: &Baseline{putBase, "MiB/s", "SHA-256 of same stream (gen+hash)"},
		Target:   &Target{fmt.Sprintf(">= %.1fx baseline", putTarget), OnRatio, AtLeast, putTarget},
		PeakRSS:  rssPut,
		Note: fmt.Sprintf("durable streaming Put of %s (%s), stored %s MiB (%s); generator alone %s MiB/s; baseline passes %s / %s MiB/s; %s",
			label, dPut.Round(time.Millisecond), formatValue(float64(info.StoredSize)/mib), info.Compression,
			formatValue(mibPerSec(size, a.Gen)), formatValue(mibPerSec(size, a.Total)), formatValue(mibPerSec(size, b.Total)),
			ioText(ioPut, size, "written")),
	}
	get := Row{
		Name:     name + "/get",
		Figure:   Quantity{med.rate, "MiB/s"},
		Baseline: &Baseline{med.base, "MiB/s", "SHA-256 alone, same bytes"},
		Target:   &Target{fmt.Sprintf(">= %.2gx baseline", getTarget), OnRatio, AtLeast, getTarget},
		PeakRSS:  rssGet,
		Note: fmt.Sprintf("Fetch + io.Copy to EOF, every chunk CRC-checked and the digest verified; the median of %d gets (%s), each against the better SHA-256 pass just before or after it; ratios min %.3fx, median %.3fx, max %.3fx; %s (first get)",
			len(gets), getTimes(gets[:]), lo, med.rate/med.base, hi, ioText(ioGet, size, "read")),
	}
	rows := []Row{put, get}
	if kind == Random {
		rows = append(rows, Row{
			Name:     name + "/put-vs-disk",
			Figure:   put.Figure,
			Baseline: &Baseline{mibPerSec(size, dDisk), "MiB/s", "plain file, synced every MiB, same size"},
			PeakRSS:  rssPut,
			Note: fmt.Sprintf("the put against writing the same number of bytes to a plain file as Pebble writes tables (sync_file_range every MiB, fdatasync at the end), right after it (%s)",
				dDisk.Round(time.Millisecond)),
		})
	}
	rows = append(rows, rssRow(name+"/put-rss", rssPut, rssHash, "put"), rssRow(name+"/get-rss", rssGet, rssHash, "get"))
	if kind == Random {
		return rows, nil
	}

	e.logf("%s: zstd (SpeedFastest) over the whole %s", name, label)
	var (
		zn int64
		dz time.Duration
	)
	phase(ctx, "zstd", func(context.Context) { zn, dz, err = ZstdSize(kind, largeSeed, size) })
	if err != nil {
		return nil, err
	}
	rows = append(rows,
		Row{
			Name:     name + "/put-vs-zstd",
			Figure:   put.Figure,
			Baseline: &Baseline{mibPerSec(size, dz), "MiB/s", "zstd fastest stream encoder (gen incl.)"},
			PeakRSS:  rssPut,
			Note:     "the put against compressing the same stream whole with klauspost/compress zstd SpeedFastest (default encoder concurrency), measured after the get",
		},
		Row{
			Name:     name + "/stored-size",
			Figure:   Quantity{float64(info.StoredSize) / mib, "MiB"},
			Baseline: &Baseline{float64(zn) / mib, "MiB", "zstd fastest, whole artifact"},
			Target:   &Target{"<= 1.10x baseline", OnRatio, AtMost, 1.10},
			Note: fmt.Sprintf("Stat StoredSize (%s) of %s; %.2f:1 against zstd's %.2f:1; store directory %s MiB on disk",
				info.Compression, label, float64(size)/float64(info.StoredSize), float64(size)/float64(zn),
				formatValue(float64(dirSize(filepath.Join(dir, "store")))/mib)),
		})
	return rows, nil
}

// ioText describes the I/O of a phase against the artifact size.
func ioText(c IOCounters, size int64, dir string) string {
	if !c.OK {
		return "I/O counters unavailable"
	}
	if dir == "read" {
		return fmt.Sprintf("read syscalls during it %s MiB (%.2fx the artifact), from the device %s MiB", formatValue(float64(c.RChar)/mib),
			float64(c.RChar)/float64(size), formatValue(float64(c.ReadBytes)/mib))
	}
	return fmt.Sprintf("write syscalls during it %s MiB (%.2fx the artifact), to the device %s MiB", formatValue(float64(c.WChar)/mib),
		float64(c.WChar)/float64(size), formatValue(float64(c.WriteBytes)/mib))
}

// DiskWrite writes size bytes (a random chunk, repeated) sequentially to a
// new file at path the way Pebble writes its tables (vfs.SyncingFile:
// sync_file_range every MiB, so write-back overlaps the writes), fdatasyncs
// it and returns the time from create to synced: what the disk gives a
// well-behaved durable sequential writer here. The file is left for the
// caller to remove once nothing is measured any more: deleting it frees its
// page cache and makes the file system discard its blocks, work that would
// otherwise run beside the next measurement.
func DiskWrite(path string, size int64) (time.Duration, error) {
	buf := make([]byte, streamBuf)
	FillRandom(buf, largeSeed, 0)
	start := time.Now()
	raw, err := vfs.Default.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return 0, err
	}
	f := vfs.NewSyncingFile(raw, vfs.SyncingFileOptions{BytesPerSync: 1 << 20})
	for left := size; left > 0; {
		n := int(min(int64(len(buf)), left))
		if _, err := f.Write(buf[:n]); err != nil {
			f.Close()
			return 0, err
		}
		left -= int64(n)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return 0, err
	}
	d := time.Since(start)
	return d, f.Close()
}

func rssRow(name string, rss, hashRSS *int64, what string) Row {
	r := Row{
		Name:    name,
		Figure:  Quantity{mibOf(rss), "MiB"},
		Target:  &Target{fmt.Sprintf("<= %d MiB", rssTarget), OnFigure, AtMost, rssTarget},
		PeakRSS: rss,
		Note:    "peak resident memory of the process during the " + what + " (absolute, not above a baseline)",
	}
	if hashRSS != nil {
		r.Baseline = &Baseline{mibOf(hashRSS), "MiB", "peak RSS of the SHA-256 pass"}
	}
	if rss == nil {
		r.Skipped = true
		r.Note = "peak RSS cannot be measured on this system"
	}
	return r
}
