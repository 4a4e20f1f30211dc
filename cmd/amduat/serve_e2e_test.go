package main

// Process fault tests of `amduat serve` (issue: service, item 8): the
// server killed with SIGKILL while clients upload. The in-process fault
// tests (malformed requests, disconnects, slow clients, auth) are in
// server/fault_test.go.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/internal/longtest"
)

// killableServe is an `amduat serve` process on an existing store.
type killableServe struct {
	cmd *exec.Cmd
	url string
	log string
}

// launchKillableServe starts `amduat serve` on the store directory dir,
// with extra flags, and waits until it listens.
func launchKillableServe(t *testing.T, dir, logPath string, extra ...string) *killableServe {
	t.Helper()
	return launchKillableServeEnv(t, nil, dir, logPath, extra...)
}

// launchKillableServeEnv is launchKillableServe with env added to the
// server's environment (a later entry wins).
func launchKillableServeEnv(t *testing.T, env []string, dir, logPath string, extra ...string) *killableServe {
	t.Helper()
	args := append([]string{"--store", dir, "--json", "serve", "--listen", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(amduatBin, args...)
	cmd.Env = append(append(os.Environ(), "GORACE=atexit_sleep_ms=20"), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	var info serveJSON
	if err == nil {
		err = json.Unmarshal([]byte(line), &info)
	}
	if err != nil || info.URL == "" {
		cmd.Process.Kill()
		cmd.Wait()
		log, _ := os.ReadFile(logPath)
		t.Fatalf("serve did not report its address (%v); log:\n%s", err, log)
	}
	return &killableServe{cmd: cmd, url: info.URL, log: logPath}
}

// kill9 kills the server with SIGKILL (no deferred code, no store Close)
// and reaps it.
func (k *killableServe) kill9(t *testing.T) {
	t.Helper()
	if err := k.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := k.cmd.Wait(); err == nil {
		t.Fatal("serve exited 0 after SIGKILL")
	}
}

// stop ends the server with SIGTERM and requires a clean exit.
func (k *killableServe) stop(t *testing.T) {
	t.Helper()
	k.cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- k.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			log, _ := os.ReadFile(k.log)
			t.Fatalf("serve exited with %v on SIGINT; log:\n%s", err, log)
		}
	case <-time.After(time.Minute): // a hang, not a timing
		k.cmd.Process.Kill()
		t.Fatal("serve did not stop within a minute of SIGINT")
	}
}

// killArt is an artifact a client saw acknowledged: its bytes are
// killBytes(key, size).
type killArt struct {
	key  uint64
	size int
}

// killBytes are the deterministic, incompressible bytes of key: a ChaCha8
// stream seeded with it, written by one Read (a loop storing byte by byte
// cost a race-detector call per byte, seconds per run under -race).
func killBytes(key uint64, size int) []byte {
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], key)
	copy(seed[8:], "killBytes")
	b := make([]byte, size)
	rand.NewChaCha8(seed).Read(b)
	return b
}

// TestServeKill9DuringUploads kills `amduat serve` with SIGKILL while
// clients put single and batched artifacts and one client is in the middle
// of a large upload, then restarts it on the same store: every put a
// client saw acknowledged is present and its bytes verify, and no cut
// upload is ever visible. The default run kills twice (one round whose
// large upload the client abandons before the kill, one whose upload the
// kill cuts) with 4 uploading clients; AMDUAT_LONG=1 kills 10 times with 8
// clients (internal/longtest). AMDUAT_SERVE_KILLS sets the number of
// kills, AMDUAT_SERVE_SEED the seed of the timings and sizes.
func TestServeKill9DuringUploads(t *testing.T) {
	t.Parallel()
	kills := longtest.Logf(t, "serve kill -9 rounds", 2, 10)
	clients := longtest.Logf(t, "uploading clients", 4, 8)
	if v := os.Getenv("AMDUAT_SERVE_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("AMDUAT_SERVE_KILLS=%q: want a positive integer", v)
		}
		kills = n
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("AMDUAT_SERVE_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("AMDUAT_SERVE_SEED=%q: %v", v, err)
		}
	}
	t.Logf("seed %d (AMDUAT_SERVE_SEED reproduces the timings and sizes)", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	ctx := context.Background()

	work := t.TempDir()
	dir := filepath.Join(work, "store")
	logPath := filepath.Join(work, "serve.log")
	if out, err := exec.Command(amduatBin, "--store", dir, "init").CombinedOutput(); err != nil {
		t.Fatalf("init: %v: %s", err, out)
	}

	var (
		mu       sync.Mutex
		acked    = map[asl.Reference]killArt{}
		partials []asl.Reference // uploads cut off mid-body: never visible
		verified = map[asl.Reference]bool{}
		stats    struct{ puts, batches, batchArts, failed int }
	)

	// check restarts nothing: it verifies, through srv, that every
	// acknowledged artifact is present (all of them, each round), that
	// the ones not yet read back have their bytes, and that no partial
	// upload is visible.
	check := func(srv *killableServe, round int) {
		t.Helper()
		c, err := httpstore.Open(ctx, srv.url, httpstore.Options{Retries: -1})
		if err != nil {
			t.Fatalf("round %d: opening the restarted server: %v", round, err)
		}
		defer c.Close()
		mu.Lock()
		defer mu.Unlock()
		refs := make([]asl.Reference, 0, len(acked))
		for ref := range acked {
			refs = append(refs, ref)
		}
		missing, err := c.Missing(ctx, refs)
		if err != nil {
			t.Fatalf("round %d: missing: %v", round, err)
		}
		if len(missing) > 0 {
			t.Errorf("round %d: %d of %d acknowledged artifacts lost after SIGKILL, e.g. %s", round, len(missing), len(refs), missing[0])
		}
		for ref, a := range acked {
			if verified[ref] {
				continue
			}
			got, err := asl.Get(ctx, c, ref, 0)
			if err != nil {
				t.Errorf("round %d: acknowledged %s: %v", round, ref, err)
				continue
			}
			if !bytes.Equal(got.Bytes, killBytes(a.key, a.size)) {
				t.Errorf("round %d: acknowledged %s has other bytes after SIGKILL", round, ref)
			}
			verified[ref] = true
		}
		if len(partials) > 0 {
			vis, err := c.Missing(ctx, partials)
			if err != nil {
				t.Fatalf("round %d: missing (partials): %v", round, err)
			}
			if len(vis) != len(partials) {
				t.Errorf("round %d: %d of %d uploads cut off mid-body are visible", round, len(partials)-len(vis), len(partials))
			}
		}
	}

	for round := range kills {
		srv := launchKillableServe(t, dir, logPath)
		check(srv, round)
		if t.Failed() {
			t.FailNow()
		}

		var wg sync.WaitGroup
		stop := make(chan struct{})
		for w := range clients {
			wseed := rng.Uint64()
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := httpstore.Open(ctx, srv.url, httpstore.Options{Retries: -1})
				if err != nil {
					return // killed already
				}
				defer c.Close()
				r := rand.New(rand.NewPCG(wseed, uint64(w)))
				for seq := uint64(0); ; seq++ {
					select {
					case <-stop:
						return
					default:
					}
					key := uint64(round)<<40 | uint64(w)<<32 | seq<<8
					if r.IntN(3) == 0 {
						n := 2 + r.IntN(30)
						arts := make([]asl.Artifact, n)
						meta := make([]killArt, n)
						for i := range arts {
							meta[i] = killArt{key + uint64(i), 1 + r.IntN(8<<10)}
							arts[i] = asl.Untagged(killBytes(meta[i].key, meta[i].size))
						}
						refs, err := c.PutBatch(ctx, asl.HashSHA256, arts)
						if err != nil {
							mu.Lock()
							stats.failed++
							mu.Unlock()
							return
						}
						mu.Lock()
						for i, ref := range refs {
							acked[ref] = meta[i]
						}
						stats.batches++
						stats.batchArts += n
						mu.Unlock()
						continue
					}
					a := killArt{key, 1 + r.IntN(256<<10)}
					ref, err := asl.PutArtifact(ctx, c, asl.HashSHA256, asl.Untagged(killBytes(a.key, a.size)))
					if err != nil {
						mu.Lock()
						stats.failed++
						mu.Unlock()
						return
					}
					mu.Lock()
					acked[ref] = a
					stats.puts++
					mu.Unlock()
				}
			}()
		}

		// A large upload cut off mid-body: by the client vanishing before
		// the kill in even rounds, by the kill itself in odd ones.
		const big = 8 << 20
		body := killBytes(uint64(round)<<40|0xffffff, big)
		ref := asl.MustDerive(asl.HashSHA256, asl.Untagged(body))
		addr := strings.TrimPrefix(srv.url, "http://")
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST /v1/artifacts HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n", addr, big)
		cut := big/4 + rng.IntN(big/2)
		if _, err := conn.Write(body[:cut]); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		partials = append(partials, ref)
		mu.Unlock()
		if round%2 == 0 {
			conn.Close()
		}

		time.Sleep(time.Duration(50+rng.IntN(400)) * time.Millisecond)
		srv.kill9(t)
		close(stop)
		wg.Wait()
		conn.Close()
	}

	srv := launchKillableServe(t, dir, logPath)
	check(srv, kills)
	srv.stop(t)
	// Every artifact in the store, acknowledged or not, re-hashes to its
	// reference.
	if out, err := exec.Command(amduatBin, "--store", dir, "verify").CombinedOutput(); err != nil {
		t.Fatalf("amduat verify after %d kills: %v: %s", kills, err, out)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d SIGKILLs during uploads: %d acknowledged artifacts (%d single puts, %d batches of %d artifacts; %d requests cut by the kills) all present with their bytes after restart; %d uploads cut off mid-body, none visible; %d lost",
		kills, len(acked), stats.puts, stats.batches, stats.batchArts, stats.failed, len(partials), len(acked)-len(verified))
	if len(verified) != len(acked) {
		t.Errorf("%d acknowledged artifacts not verified", len(acked)-len(verified))
	}
}
