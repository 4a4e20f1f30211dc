// Package miniotest runs a MinIO server for tests of the S3 backend
// (SPECS.md §6.7): a fresh data directory, a free loopback port and fresh
// credentials per server. Tests skip, with one line saying how to install
// it, when no minio binary is on PATH or in $(go env GOPATH)/bin.
package miniotest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// SkipMessage is the one line a test skips with when MinIO is missing.
const SkipMessage = "minio not installed: go install github.com/minio/minio@latest; S3 tests skipped"

// Binary returns the path of the minio binary, or "".
func Binary() string {
	if p, err := exec.LookPath("minio"); err == nil {
		return p
	}
	var dirs []string
	if gp := os.Getenv("GOPATH"); gp != "" {
		dirs = append(dirs, filepath.SplitList(gp)...)
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		dirs = append(dirs, filepath.SplitList(string(trim(out)))...)
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, "go"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "bin", "minio")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

func trim(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}

// Server is one running MinIO.
type Server struct {
	Endpoint  string // 127.0.0.1:PORT
	AccessKey string
	SecretKey string

	t    testing.TB // nil when Launched
	bin  string
	dir  string
	mu   sync.Mutex
	lend sync.Mutex // held by the test that borrowed the server
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// Start starts a MinIO server for t, stopped at t's cleanup; it skips t
// when MinIO is not installed. The server is handed out (by Start, Launch
// and Restart) only once it has served a signed bucket listing, so its
// object layer accepts requests.
func Start(t testing.TB) *Server {
	t.Helper()
	if Binary() == "" {
		t.Skip(SkipMessage)
	}
	s, err := Launch(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s.t = t
	t.Cleanup(s.Stop)
	return s
}

// ErrNotInstalled: no minio binary was found.
var ErrNotInstalled = errors.New(SkipMessage)

// Launch starts a MinIO server with its data under dir (outside tests:
// `amduat bench`); the caller Stops it.
func Launch(dir string) (*Server, error) {
	bin := Binary()
	if bin == "" {
		return nil, ErrNotInstalled
	}
	var k [12]byte
	rand.Read(k[:])
	s := &Server{
		bin: bin, dir: dir,
		AccessKey: "amduat" + hex.EncodeToString(k[:4]),
		SecretKey: hex.EncodeToString(k[4:]) + "secret",
	}
	// The port is free when picked, but another process may take it
	// before MinIO binds it (packages test in parallel): a server that
	// exits at start is tried again on another port.
	for try := 1; ; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("miniotest: %w", err)
		}
		s.Endpoint = l.Addr().String()
		l.Close()
		err = s.start()
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, errExited) || try == 3 {
			return nil, err
		}
	}
}

// errExited: the server process ended while it was starting.
var errExited = errors.New("minio exited at start")

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	logf, err := os.OpenFile(filepath.Join(s.dir, "minio.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, "server", filepath.Join(s.dir, "data"), "--address", s.Endpoint, "--console-address", "127.0.0.1:0", "--quiet")
	cmd.Env = append(os.Environ(),
		"MINIO_ROOT_USER="+s.AccessKey, "MINIO_ROOT_PASSWORD="+s.SecretKey,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off", "CI=true")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := startCmd(cmd); err != nil {
		logf.Close()
		return fmt.Errorf("miniotest: start %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	s.cmd, s.done, s.log = cmd, done, logf
	return s.waitReady(done, logf.Name())
}

// readyWithin bounds the wait for a starting server: a failure bound for a
// server that never comes up, not a timing the tests depend on (a loaded
// machine may take many seconds).
const readyWithin = 3 * time.Minute

// waitReady returns once the server answers a signed S3 request (a bucket
// listing) with success: /minio/health/ready says 200 before the object
// layer accepts requests, and a request in that window is answered 503
// XMinioServerNotInitialized (issue 25). It fails, leaving no process
// behind, when the server exits or is not ready within readyWithin. The
// caller holds s.mu.
func (s *Server) waitReady(done <-chan struct{}, logName string) error {
	client, err := minio.New(s.Endpoint, &minio.Options{
		Creds:      credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Region:     "us-east-1",
		MaxRetries: 1,
	})
	if err != nil {
		return fmt.Errorf("miniotest: %w", err)
	}
	deadline := time.Now().Add(readyWithin)
	var last error
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 250*time.Millisecond) {
		select {
		case <-done:
			b, _ := os.ReadFile(logName)
			s.log.Close()
			s.cmd = nil
			return fmt.Errorf("miniotest: %w: %s", errExited, b)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, last = client.ListBuckets(ctx)
		cancel()
		if last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			s.cmd.Process.Kill()
			<-done
			s.log.Close()
			s.cmd = nil
			return fmt.Errorf("miniotest: minio at %s not ready within %s: %w", s.Endpoint, readyWithin, last)
		}
		select {
		case <-done:
		case <-time.After(wait):
		}
	}
}

// Stop stops the server (SIGKILL: as abrupt as a crash); its data stays
// for Restart.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.done
	s.log.Close()
	s.cmd = nil
}

// Restart starts the stopped server again on the same port and data.
func (s *Server) Restart() {
	if err := s.start(); err != nil {
		if s.t == nil {
			panic(err)
		}
		s.t.Fatal(err)
	}
}

// Borrow lends a Launched server to t until t's cleanup, one test at a
// time: it waits while another test holds the server. For tests that stop
// and restart MinIO, which cannot share one with tests running beside them
// but can take turns on one instead of each starting its own (a start
// costs seconds of CPU; issue 25). When Borrow returns the server is
// running (restarted if the previous borrower left it stopped), and
// Restart reports a failure through t.
func (s *Server) Borrow(t testing.TB) {
	t.Helper()
	s.lend.Lock()
	t.Cleanup(func() {
		s.t = nil
		s.lend.Unlock()
	})
	s.t = t
	if s.PID() == 0 {
		s.Restart()
	}
}

// PID is the running server's process id, 0 when it is stopped.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// DataDir is the server's data directory.
func (s *Server) DataDir() string { return filepath.Join(s.dir, "data") }

// Shared is one MinIO that a test package's tests share, started by the
// first test that asks for it (in a temporary directory whose name starts
// with Prefix) and stopped by Close, which the package's TestMain calls
// after its tests. A start costs seconds of CPU on a loaded machine
// (issue 25). The zero value with Prefix set is ready to use.
type Shared struct {
	// Prefix names the temporary data directory (os.MkdirTemp's pattern).
	Prefix string
	// Started, when set, runs once after the server is up, before any
	// test gets it.
	Started func(*Server)

	once sync.Once
	dir  string
	m    *Server
	err  error
}

// Get returns the shared server, starting it on the first call; it skips
// t when MinIO is not installed and fails t when the server cannot start.
func (s *Shared) Get(t testing.TB) *Server {
	t.Helper()
	if Binary() == "" {
		t.Skip(SkipMessage)
	}
	s.once.Do(func() {
		if s.dir, s.err = os.MkdirTemp("", s.Prefix); s.err != nil {
			return
		}
		if s.m, s.err = Launch(s.dir); s.err == nil && s.Started != nil {
			s.Started(s.m)
		}
	})
	if s.err != nil {
		t.Fatalf("starting the shared MinIO: %v", s.err)
	}
	return s.m
}

// Close stops the server, if one was started, and removes its data.
func (s *Shared) Close() error {
	if s.m != nil {
		s.m.Stop()
	}
	if s.dir == "" {
		return nil
	}
	return os.RemoveAll(s.dir)
}
