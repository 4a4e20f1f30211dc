package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/internal/longtest"
	"github.com/cockroachdb/pebble/v2/vfs"
)

const pipeChunk = 16 << 10

// readerLabel is the goroutine label (runtime/pprof) by which
// readerGoroutines tells the goroutines of one test from those of the
// tests running beside it.
const readerLabel = "pebblestore-test"

// labelReaders labels the test's goroutine, and with it every goroutine
// started from it from now on (the workers of the readers it opens among
// them), with the name of its top-level test.
func labelReaders(t *testing.T) {
	t.Helper()
	top, _, _ := strings.Cut(t.Name(), "/")
	pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels(readerLabel, top)))
}

// readerGoroutines counts the goroutines running chunkReader code that
// carry the label labelReaders gave t's top-level test.
func readerGoroutines(t *testing.T) int {
	t.Helper()
	top, _, _ := strings.Cut(t.Name(), "/")
	want := fmt.Sprintf("# labels: {%q:%q}", readerLabel, top)
	var b bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		t.Fatal(err)
	}
	// Records of the legacy text form: "N @ pc...", then "# labels: {...}"
	// when the goroutines have labels, then one "#\tpc\tfunction..." line
	// per frame.
	// The calling goroutine is among them, labelled: else the count of a
	// test that did not call labelReaders would always be 0.
	count, n, labelled, counted, self := 0, 0, false, false, false
	for _, line := range strings.Split(b.String(), "\n") {
		switch {
		case strings.Contains(line, " @ "):
			n, _ = strconv.Atoi(line[:strings.Index(line, " ")])
			labelled, counted = false, false
		case strings.HasPrefix(line, "# labels: "):
			labelled = line == want
		case labelled && strings.Contains(line, "pebblestore.readerGoroutines"):
			self = true
		case labelled && !counted && strings.Contains(line, "pebblestore.(*chunkReader)"):
			count += n
			counted = true
		}
	}
	if !self {
		t.Fatalf("the calling goroutine lacks the label %s=%s (labelReaders); goroutine profile:\n%s", readerLabel, top, b.String())
	}
	return count
}

// checkNoReaderGoroutines waits for every chunkReader goroutine to exit
// (a minute is a bound for a leak, not a timing: a loaded machine may take
// seconds to schedule them).
func checkNoReaderGoroutines(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		n := readerGoroutines(t)
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d chunk reader goroutines left:\n%s", n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// readInPieces reads rc to the end in pieces of step bytes.
func readInPieces(rc io.Reader, step int) ([]byte, error) {
	var got []byte
	buf := make([]byte, step)
	for {
		n, err := rc.Read(buf)
		got = append(got, buf[:n]...)
		if err == io.EOF {
			return got, nil
		}
		if err != nil {
			return got, err
		}
	}
}

type pipeArtifact struct {
	name string
	data []byte
	ref  asl.Reference
}

// putPipeArtifacts stores chunked artifacts of 2 to 20 chunks of pipeChunk
// bytes (to 38 with AMDUAT_LONG=1, internal/longtest), compressible and
// not. The largest has more chunks than a reader has buffers
// (maxFetchWorkers+fetchSpare), so every buffer is reused; it was most of
// the bytes the fetch tests put and read (issue 25).
func putPipeArtifacts(t *testing.T, s *Store) []pipeArtifact {
	t.Helper()
	var arts []pipeArtifact
	largest := longtest.Count(19, 37)*pipeChunk + 123
	if largest/pipeChunk <= maxFetchWorkers+fetchSpare {
		t.Fatalf("the largest artifact has %d chunks, no more than a reader's %d buffers", largest/pipeChunk+1, maxFetchWorkers+fetchSpare)
	}
	for _, size := range []int{pipeChunk + 1, 2 * pipeChunk, 7*pipeChunk - 1, largest} {
		for _, text := range []bool{false, true} {
			data := genBytes(uint64(size), size, text)
			ref := put(t, s, asl.HashSHA256, asl.Untagged(data))
			if rec := indexOf(t, s, ref); (rec.Compression == compNone) == text {
				t.Fatalf("%d bytes, compressible %v: stored with compression %d", size, text, rec.Compression)
			}
			arts = append(arts, pipeArtifact{fmt.Sprintf("%d bytes, compressible %v", size, text), data, ref})
		}
	}
	return arts
}

// TestFetchPipelineRoundTrip reads chunked artifacts back in both layouts:
// parts in a pack (the default) and chunks in Pebble (version 2, PackMin
// < 0).
func TestFetchPipelineRoundTrip(t *testing.T) {
	t.Parallel()
	labelReaders(t)
	for _, layout := range []struct {
		name    string
		packMin int64
	}{{"packed", 0}, {"pebble", -1}} {
		t.Run(layout.name, func(t *testing.T) {
			fs := vfs.NewMem()
			s := newMemStore(t, &Options{FS: fs, ChunkSize: pipeChunk, IngestMin: -1, PackMin: layout.packMin})
			arts := putPipeArtifacts(t, s)
			for _, a := range arts {
				if rec := indexOf(t, s, a.ref); rec.packed() != (layout.packMin >= 0) {
					t.Fatalf("%s: record %+v", a.name, rec)
				}
			}
			t.Run("pooled buffers", func(t *testing.T) { checkPipeArtifacts(t, s, arts) })
			s.Close()
			// Reopened with another chunk size, the records keep theirs: the
			// reader's buffers then come from outside the store's pool.
			s2, err := Open("store", &Options{FS: fs, ChunkSize: 2 * pipeChunk})
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			t.Run("other chunk size", func(t *testing.T) { checkPipeArtifacts(t, s2, arts) })
			checkNoReaderGoroutines(t)
		})
	}
}

func checkPipeArtifacts(t *testing.T, s *Store, arts []pipeArtifact) {
	ctx := context.Background()
	for _, a := range arts {
		if rec := indexOf(t, s, a.ref); rec.inline() || rec.Chunk != pipeChunk {
			t.Fatalf("%s: record with blob %d, chunk size %d", a.name, rec.Blob, rec.Chunk)
		}
		for _, step := range []int{1000, pipeChunk, 3*pipeChunk + 7} {
			rc, hdr, err := s.Fetch(ctx, a.ref)
			if err != nil {
				t.Fatal(err)
			}
			got, err := readInPieces(rc, step)
			rc.Close()
			if err != nil || hdr.Size != uint64(len(a.data)) || !bytes.Equal(got, a.data) {
				t.Fatalf("%s: read in steps of %d: %d of %d bytes, equal %v, %v", a.name, step, len(got), len(a.data), bytes.Equal(got, a.data), err)
			}
		}
		rc, _, err := s.Fetch(ctx, a.ref)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		n, err := io.Copy(&out, rc) // through WriteTo
		rc.Close()
		if err != nil || n != int64(len(a.data)) || !bytes.Equal(out.Bytes(), a.data) {
			t.Fatalf("%s: io.Copy: %d bytes, %v", a.name, n, err)
		}
	}
}

// TestFetchEarlyClose closes readers at every stage of a read: before the
// first byte, mid-chunk, on chunk boundaries, just before the end. Close is
// idempotent, later reads fail, and no reader goroutine is left.
func TestFetchEarlyClose(t *testing.T) {
	t.Parallel()
	labelReaders(t)
	ctx := context.Background()
	s := newMemStore(t, &Options{ChunkSize: pipeChunk, IngestMin: -1, PackMin: -1})
	for _, text := range []bool{false, true} {
		data := genBytes(7, 40*pipeChunk+5, text)
		ref := put(t, s, asl.HashSHA256, asl.Untagged(data))
		for _, n := range []int{0, 1, pipeChunk - 1, pipeChunk, 3*pipeChunk + 17, 39 * pipeChunk, len(data) - 1} {
			rc, _, err := s.Fetch(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]byte, n)
			if _, err := io.ReadFull(rc, got); err != nil || !bytes.Equal(got, data[:n]) {
				t.Fatalf("reading %d bytes: %v", n, err)
			}
			if err := rc.Close(); err != nil {
				t.Fatal(err)
			}
			if err := rc.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if m, err := rc.Read(make([]byte, 10)); m != 0 || err == nil || err == io.EOF {
				t.Fatalf("Read after Close after %d bytes: %d, %v", n, m, err)
			}
		}
	}
	checkNoReaderGoroutines(t)
}

// TestFetchConcurrentReaders runs many readers at once, some closed early,
// against the same and different artifacts (run it with -race).
func TestFetchConcurrentReaders(t *testing.T) {
	t.Parallel()
	labelReaders(t)
	ctx := context.Background()
	s := newMemStore(t, &Options{ChunkSize: pipeChunk, IngestMin: -1, PackMin: -1})
	arts := putPipeArtifacts(t, s)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for k := range 2 * len(arts) {
				a := arts[(g+k)%len(arts)]
				rc, _, err := s.Fetch(ctx, a.ref)
				if err != nil {
					errs <- err
					return
				}
				var got []byte
				switch k % 3 {
				case 0:
					got, err = readInPieces(rc, 4093)
				case 1:
					var out bytes.Buffer
					_, err = io.Copy(&out, rc)
					got = out.Bytes()
				default:
					got = make([]byte, len(a.data)/2)
					_, err = io.ReadFull(rc, got)
				}
				rc.Close()
				if err == nil && !bytes.Equal(got, a.data[:len(got)]) || err == nil && k%3 != 2 && len(got) != len(a.data) {
					err = fmt.Errorf("%s: wrong bytes", a.name)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkNoReaderGoroutines(t)
}

// twelveChunks is a store with chunks in Pebble (the version 2 layout)
// holding one artifact of 12 chunks, the last one 100 bytes short,
// generated from seed (text-like when text is set).
func twelveChunks(t *testing.T, seed uint64, text bool) (*Store, []byte, asl.Reference) {
	t.Helper()
	s := newMemStore(t, &Options{ChunkSize: pipeChunk, IngestMin: -1, PackMin: -1})
	data := genBytes(seed, 12*pipeChunk-100, text)
	return s, data, put(t, s, asl.HashSHA256, asl.Untagged(data))
}

// TestFetchErrorOrder damages chunks 3 and 5 of an artifact: whichever
// fails first, the reader returns exactly chunks 0-2 and then chunk 3's
// error; with only chunk 5 damaged and chunk 3 slow, chunks 0-4 and then
// chunk 5's error.
func TestFetchErrorOrder(t *testing.T) {
	t.Parallel()
	labelReaders(t)
	ctx := context.Background()
	for _, text := range []bool{false, true} {
		s, data, ref := twelveChunks(t, 21, text)
		rec := indexOf(t, s, ref)
		damage := func(i uint64) {
			key, v := chunkValue(t, s, ref, i)
			rawSet(t, s, key, flip(v, headLen(t, v)+7, 0x20))
		}
		deleteChunk := func(i uint64) {
			key, _ := chunkValue(t, s, ref, i)
			if err := s.db.Delete(key, nil); err != nil {
				t.Fatal(err)
			}
		}
		// read runs a reader whose chunk 3 waits until chunk 5 was read.
		read := func(t *testing.T, step int, wantChunks int, wantErr string) {
			t.Helper()
			fiveDone := make(chan struct{})
			readFn := func(rec indexRecord, i uint64, loc partLoc, buf []byte) (chunkData, error) {
				if i == 3 {
					select {
					case <-fiveDone:
					case <-time.After(time.Minute): // a bound for serial reads, which never get here
						t.Error("chunk 5 was not read while chunk 3 was in flight")
					}
				}
				c, err := s.readChunk(rec, i, loc, buf)
				if i == 5 {
					close(fiveDone)
				}
				return c, err
			}
			r := s.newChunkReader(ctx, ref, rec, readFn, 3)
			defer r.Close()
			got, err := readInPieces(r, step)
			if !errors.Is(err, asl.ErrIntegrity) || !strings.Contains(err.Error(), wantErr) {
				t.Fatalf("read ended with %v, want ErrIntegrity naming %q", err, wantErr)
			}
			if want := wantChunks * pipeChunk; len(got) != want || !bytes.Equal(got, data[:want]) {
				t.Fatalf("read %d bytes before the error, want the %d bytes of chunks 0-%d", len(got), want, wantChunks-1)
			}
			if _, err2 := r.Read(make([]byte, 1)); err2 != err {
				t.Fatalf("read after the error: %v, want %v again", err2, err)
			}
		}
		damage(5)
		t.Run(fmt.Sprintf("text %v/chunk 5", text), func(t *testing.T) {
			read(t, 5000, 5, "chunk 5 of blob")
		})
		deleteChunk(5)
		damage(3)
		t.Run(fmt.Sprintf("text %v/chunks 3 and 5", text), func(t *testing.T) {
			for _, step := range []int{1, 5000, pipeChunk, 4 * pipeChunk} {
				read(t, step, 3, "chunk 3 of blob")
			}
		})
		t.Run(fmt.Sprintf("text %v/Fetch", text), func(t *testing.T) {
			for range 20 {
				rc, _, err := s.Fetch(ctx, ref)
				if err != nil {
					t.Fatal(err)
				}
				got, err := readInPieces(rc, 7919)
				rc.Close()
				if !errors.Is(err, asl.ErrIntegrity) || !strings.Contains(err.Error(), "chunk 3 of blob") || !bytes.Equal(got, data[:3*pipeChunk]) {
					t.Fatalf("%d bytes, then %v", len(got), err)
				}
			}
		})
	}
	checkNoReaderGoroutines(t)
}

// TestFetchLastChunkWithheld forges the last chunk with a valid CRC: every
// byte before it is returned, its own bytes never are.
func TestFetchLastChunkWithheld(t *testing.T) {
	t.Parallel()
	labelReaders(t)
	ctx := context.Background()
	s := newMemStore(t, &Options{ChunkSize: pipeChunk, IngestMin: -1, PackMin: -1})
	data := genBytes(5, 10*pipeChunk+99, false)
	ref := put(t, s, asl.HashSHA256, asl.Untagged(data))
	last := forgeLastChunk(t, s, ref, 98) // the last chunk's last byte
	for _, step := range []int{1, 4096, 1 << 20} {
		rc, _, err := s.Fetch(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		got, err := readInPieces(rc, step)
		rc.Close()
		if !errors.Is(err, asl.ErrIntegrity) || !bytes.Equal(got, data[:last*pipeChunk]) {
			t.Fatalf("%d bytes, then %v; want the %d bytes before the last chunk, then ErrIntegrity", len(got), err, last*pipeChunk)
		}
	}
	checkNoReaderGoroutines(t)
}

// TestFetchCancel cancels the context mid-read: the read ends with the
// context's error, the bytes before it are the artifact's.
func TestFetchCancel(t *testing.T) {
	t.Parallel()
	labelReaders(t)
	s := newMemStore(t, &Options{ChunkSize: pipeChunk, IngestMin: -1, PackMin: -1})
	data := genBytes(9, 40*pipeChunk, true)
	ref := put(t, s, asl.HashSHA256, asl.Untagged(data))
	for _, at := range []int{0, 1, 2*pipeChunk + 5} {
		ctx, cancel := context.WithCancel(context.Background())
		rc, _, err := s.Fetch(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, at)
		if _, err := io.ReadFull(rc, got); err != nil {
			t.Fatal(err)
		}
		cancel()
		rest, err := readInPieces(rc, 3000)
		got = append(got, rest...)
		if !errors.Is(err, context.Canceled) || len(got) >= len(data) || !bytes.Equal(got, data[:len(got)]) {
			t.Fatalf("after cancelling at %d: %d bytes, then %v", at, len(got), err)
		}
		rc.Close()
	}
	checkNoReaderGoroutines(t)
}

// TestFetchStoreClosed closes the store under an open reader: the read
// fails with ErrClosed after a correct prefix, and Close of the reader
// still returns.
func TestFetchStoreClosed(t *testing.T) {
	t.Parallel()
	labelReaders(t)
	ctx := context.Background()
	s := newMemStore(t, &Options{ChunkSize: pipeChunk, IngestMin: -1, PackMin: -1})
	data := genBytes(11, 40*pipeChunk, false)
	ref := put(t, s, asl.HashSHA256, asl.Untagged(data))
	rc, _, err := s.Fetch(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, pipeChunk+3)
	if _, err := io.ReadFull(rc, got); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rest, err := readInPieces(rc, 5000)
	got = append(got, rest...)
	if !errors.Is(err, ErrClosed) || !bytes.Equal(got, data[:len(got)]) {
		t.Fatalf("%d bytes, then %v; want a prefix, then ErrClosed", len(got), err)
	}
	rc.Close()
	checkNoReaderGoroutines(t)
}

// TestFetchWorkerCounts reads artifacts through pipelines of 1 to 9
// workers: the bytes do not depend on how many read at once.
func TestFetchWorkerCounts(t *testing.T) {
	t.Parallel()
	labelReaders(t)
	ctx := context.Background()
	s := newMemStore(t, &Options{ChunkSize: pipeChunk, IngestMin: -1, PackMin: -1})
	for _, a := range putPipeArtifacts(t, s) {
		rec := indexOf(t, s, a.ref)
		for _, workers := range []int{1, 2, 3, 9} {
			r := s.newChunkReader(ctx, a.ref, rec, s.readChunk, workers)
			got, err := readInPieces(r, 6000)
			r.Close()
			if err != nil || !bytes.Equal(got, a.data) {
				t.Fatalf("%s, %d workers: %d of %d bytes, %v", a.name, workers, len(got), len(a.data), err)
			}
		}
	}
	checkNoReaderGoroutines(t)
}

// TestFetchWorkersExitWithoutClose: a reader read to its end, or to an
// error, stops its goroutines even before Close.
func TestFetchWorkersExitWithoutClose(t *testing.T) {
	t.Parallel()
	labelReaders(t)
	ctx := context.Background()
	s := newMemStore(t, &Options{ChunkSize: pipeChunk, IngestMin: -1, PackMin: -1})
	data := genBytes(13, 30*pipeChunk+1, true)
	ref := put(t, s, asl.HashSHA256, asl.Untagged(data))
	rc, _, err := s.Fetch(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(rc); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("%d bytes, %v", len(got), err)
	}
	checkNoReaderGoroutines(t)
	rc.Close()

	key, v := chunkValue(t, s, ref, 4)
	rawSet(t, s, key, flip(v, headLen(t, v)+3, 1))
	rc, _, err = s.Fetch(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(rc); !errors.Is(err, asl.ErrIntegrity) {
		t.Fatalf("read of a damaged artifact: %v", err)
	}
	checkNoReaderGoroutines(t)
	rc.Close()
}

// TestFetchPullAndPush reads artifacts alternating between a slow Read
// consumer (away between calls, so the workers hash ahead) and WriteTo
// (the consumer hashes itself), through pipelines of 1 to 9 workers: the
// bytes do not depend on who hashed which chunk.
func TestFetchPullAndPush(t *testing.T) {
	t.Parallel()
	labelReaders(t)
	ctx := context.Background()
	s := newMemStore(t, &Options{ChunkSize: pipeChunk, IngestMin: -1})
	for _, a := range putPipeArtifacts(t, s) {
		rec := indexOf(t, s, a.ref)
		for _, workers := range []int{1, 2, 9} {
			r := s.newChunkReader(ctx, a.ref, rec, s.readChunk, workers)
			var got bytes.Buffer
			buf := make([]byte, 3*pipeChunk/2)
			var err error
			for err == nil {
				// A Read, a pause that lets the workers hash ahead, then a
				// WriteTo that stops after a chunk's worth.
				var n int
				n, err = r.Read(buf)
				got.Write(buf[:n])
				if err != nil {
					break
				}
				time.Sleep(200 * time.Microsecond)
				_, err = r.WriteTo(&limitWriter{w: &got, left: pipeChunk})
				if errors.Is(err, errLimit) {
					err = nil
				}
			}
			r.Close()
			if err != io.EOF || !bytes.Equal(got.Bytes(), a.data) {
				t.Fatalf("%s, %d workers: %d of %d bytes, %v", a.name, workers, got.Len(), len(a.data), err)
			}
		}
	}
	checkNoReaderGoroutines(t)
}

var errLimit = errors.New("limit reached")

// limitWriter passes on at most left bytes, then fails with errLimit.
type limitWriter struct {
	w    io.Writer
	left int
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, errLimit
	}
	n := min(len(p), l.left)
	n, err := l.w.Write(p[:n])
	l.left -= n
	if err == nil && n < len(p) {
		err = errLimit
	}
	return n, err
}

// TestFetchWriteToDamage damages one chunk of an artifact (chunks in
// Pebble, where the test can reach them), or forges its last chunk with a
// valid CRC: WriteTo writes exactly the bytes before the damaged chunk,
// then fails with ErrIntegrity.
func TestFetchWriteToDamage(t *testing.T) {
	t.Parallel()
	labelReaders(t)
	ctx := context.Background()
	s := newMemStore(t, &Options{ChunkSize: pipeChunk, IngestMin: -1, PackMin: -1})
	data := genBytes(31, 12*pipeChunk+77, false)
	ref := put(t, s, asl.HashSHA256, asl.Untagged(data))
	rec := indexOf(t, s, ref)
	for _, bad := range []uint64{0, 4, rec.chunks() - 1} {
		key, v := chunkValue(t, s, ref, bad)
		rawSet(t, s, key, flip(v, headLen(t, v)+11, 0x04))
		for range 5 {
			if got, err := copyFetched(ctx, s, ref); !errors.Is(err, asl.ErrIntegrity) || !bytes.Equal(got, data[:bad*pipeChunk]) {
				t.Fatalf("chunk %d damaged: %d bytes written, then %v; want %d bytes, then ErrIntegrity", bad, len(got), err, bad*pipeChunk)
			}
		}
		rawSet(t, s, key, v)
	}
	last := forgeLastChunk(t, s, ref, 0)
	if got, err := copyFetched(ctx, s, ref); !errors.Is(err, asl.ErrIntegrity) || !bytes.Equal(got, data[:last*pipeChunk]) {
		t.Fatalf("forged last chunk: %d bytes written, then %v", len(got), err)
	}
	checkNoReaderGoroutines(t)
}

// copyFetched fetches ref and copies it with io.Copy (thus WriteTo),
// returning the bytes written and the copy's error.
func copyFetched(ctx context.Context, s *Store, ref asl.Reference) ([]byte, error) {
	rc, _, err := s.Fetch(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var got bytes.Buffer
	_, err = io.Copy(&got, rc)
	return got.Bytes(), err
}

// TestFetchForVerifier: FetchForVerifier returns the bytes Fetch returns,
// checks every chunk's CRC and the record's summary as Fetch does, and
// leaves only the whole digest to its caller: a last chunk forged with a
// valid CRC reaches the caller, whose asl.VerifyReader refuses it.
func TestFetchForVerifier(t *testing.T) {
	t.Parallel()
	labelReaders(t)
	ctx := context.Background()
	for _, text := range []bool{false, true} {
		s, data, ref := twelveChunks(t, 31, text)
		read := func(step int) ([]byte, asl.Header, error) {
			rc, hdr, err := s.FetchForVerifier(ctx, ref)
			if err != nil {
				return nil, hdr, err
			}
			defer rc.Close()
			if step == 0 {
				var b bytes.Buffer
				_, err := rc.(io.WriterTo).WriteTo(&b)
				return b.Bytes(), hdr, err
			}
			got, err := readInPieces(rc, step)
			return got, hdr, err
		}
		for _, step := range []int{0, 1, 5000, pipeChunk} {
			got, hdr, err := read(step)
			if err != nil || !bytes.Equal(got, data) || hdr.Size != uint64(len(data)) {
				t.Fatalf("text %v, step %d: %d bytes, %v; want the %d bytes", text, step, len(got), err, len(data))
			}
		}
		key, orig := chunkValue(t, s, ref, 3)
		rawSet(t, s, key, flip(orig, headLen(t, orig)+7, 0x20))
		if got, _, err := read(5000); !errors.Is(err, asl.ErrIntegrity) || !strings.Contains(err.Error(), "chunk 3 of blob") || !bytes.Equal(got, data[:3*pipeChunk]) {
			t.Fatalf("text %v, chunk 3 damaged: %d bytes, then %v; want the 3 chunks before it, then ErrIntegrity", text, len(got), err)
		}
		rawSet(t, s, key, orig)
		if text {
			continue // forgeLastChunk writes a raw chunk
		}
		last := forgeLastChunk(t, s, ref, 98)
		got, hdr, err := read(4096)
		if err != nil || len(got) != len(data) || bytes.Equal(got, data) || !bytes.Equal(got[:last*pipeChunk], data[:last*pipeChunk]) {
			t.Fatalf("last chunk forged: %d bytes, %v; want all of them, the forged byte included, and no error", len(got), err)
		}
		callerRefuses(t, ref, hdr, got)
		rc, _, err := s.Fetch(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(io.Discard, rc)
		rc.Close()
		if !errors.Is(err, asl.ErrIntegrity) {
			t.Fatalf("Fetch of the forged artifact: %v, want ErrIntegrity", err)
		}
	}
	checkNoReaderGoroutines(t)
}

// callerRefuses checks that got, returned by FetchForVerifier for ref, is
// refused by the digest its caller computes (asl.VerifyReader).
func callerRefuses(t *testing.T, ref asl.Reference, hdr asl.Header, got []byte) {
	t.Helper()
	vr, err := asl.VerifyReader(ref, hdr, bytes.NewReader(got))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, vr); !errors.Is(err, asl.ErrIntegrity) {
		t.Fatalf("the caller's digest of %d bytes FetchForVerifier returned: %v, want ErrIntegrity", len(got), err)
	}
}

// TestFetchForVerifierSmall: an artifact stored inline or packed whole
// comes back from FetchForVerifier with the bytes Fetch returns; a damaged
// pack record fails its CRC in both; bytes only the digest tells apart
// (a record rewritten with a valid CRC, as Corrupt does) reach the caller
// of FetchForVerifier, whose asl.VerifyReader refuses them, while Fetch
// refuses them itself.
func TestFetchForVerifierSmall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name   string
		opts   Options
		data   []byte
		inline bool
	}{
		{"inline raw", Options{PackMin: -1}, genBytes(131, 1024, false), true},
		{"inline zstd", Options{PackMin: -1, MinCompressSize: 512}, genBytes(132, 4000, true), true},
		{"packed raw", Options{}, genBytes(133, 1024, false), false},
		{"packed zstd", Options{MinCompressSize: 512}, genBytes(134, 4000, true), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			c.opts.FS = fs
			s := newMemStore(t, &c.opts)
			a := asl.Untagged(c.data)
			ref := put(t, s, asl.HashSHA256, a)
			rec := indexOf(t, s, ref)
			if rec.inline() != c.inline || (!c.inline && !rec.packedSingle()) {
				t.Fatalf("record %+v: inline %v, packed whole %v", rec, rec.inline(), rec.packedSingle())
			}
			read := func(fetch func(context.Context, asl.Reference) (io.ReadCloser, asl.Header, error)) ([]byte, asl.Header, error) {
				rc, hdr, err := fetch(ctx, ref)
				if err != nil {
					return nil, hdr, err
				}
				defer rc.Close()
				got, err := io.ReadAll(rc)
				return got, hdr, err
			}
			got, hdr, err := read(s.FetchForVerifier)
			if err != nil || !bytes.Equal(got, c.data) || hdr.Size != uint64(len(c.data)) {
				t.Fatalf("FetchForVerifier: %d bytes, %v; want the %d bytes", len(got), err, len(c.data))
			}
			if !c.inline {
				path := packPath(s, rec.Pack)
				at := int64(rec.Offset + rec.Stored - 3)
				orig := readFileRange(t, fs, path, at, at+1)
				patchFile(t, fs, path, at, []byte{orig[0] ^ 0x04})
				for name, fetch := range map[string]func(context.Context, asl.Reference) (io.ReadCloser, asl.Header, error){"Fetch": s.Fetch, "FetchForVerifier": s.FetchForVerifier} {
					if _, _, err := read(fetch); !errors.Is(err, asl.ErrIntegrity) {
						t.Fatalf("%s of a damaged pack record: %v, want ErrIntegrity", name, err)
					}
				}
				patchFile(t, fs, path, at, orig)
			}
			other := bytes.Clone(c.data)
			other[7] ^= 1
			if !s.Corrupt(ref, other) {
				t.Fatal("Corrupt reported the artifact absent")
			}
			if _, _, err := read(s.Fetch); !errors.Is(err, asl.ErrIntegrity) {
				t.Fatalf("Fetch of other bytes with a valid CRC: %v, want ErrIntegrity", err)
			}
			got, hdr, err = read(s.FetchForVerifier)
			if err != nil || !bytes.Equal(got, other) {
				t.Fatalf("FetchForVerifier of other bytes with a valid CRC: %d bytes, %v; want them, unchecked", len(got), err)
			}
			callerRefuses(t, ref, hdr, got)
		})
	}
}
