package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// storeTemplate is a store directory made once per test process, by the
// first test that asks for it, and copied file by file into every test
// that uses it, instead of each running `amduat init` and the same puts
// (some 0.3 CPU-seconds of child processes per store: issue 25). A copy is
// byte for byte the directory the commands left behind (new files, so
// their times are the copy's); no process opens the template itself after
// make returns. Tests whose subject is init or put make their stores
// themselves.
type storeTemplate struct {
	// make fills the store directory store with the commands run, from
	// the working directory work, by amduatIn.
	make func(store, work string) error

	once sync.Once
	dir  string
	err  error
}

// templateDirs are the directories of the templates made, removed by
// removeStoreTemplates when the tests are done.
var templateDirs struct {
	sync.Mutex
	dirs []string
}

// copyTo copies the template into the store directory of c (which must not
// exist yet), making the template first if no test has.
func (s *storeTemplate) copyTo(t *testing.T, c *cli) {
	t.Helper()
	s.once.Do(func() {
		work, err := os.MkdirTemp("", "amduat-store-template-")
		if err != nil {
			s.err = err
			return
		}
		templateDirs.Lock()
		templateDirs.dirs = append(templateDirs.dirs, work)
		templateDirs.Unlock()
		s.dir = filepath.Join(work, "store")
		s.err = s.make(s.dir, work)
	})
	if s.err != nil {
		t.Fatalf("making the template store: %v", s.err)
	}
	if err := os.CopyFS(c.store, os.DirFS(s.dir)); err != nil {
		t.Fatalf("copying the template store %s to %s: %v", s.dir, c.store, err)
	}
}

// removeStoreTemplates removes every template made (TestMain, after the
// tests).
func removeStoreTemplates() {
	templateDirs.Lock()
	defer templateDirs.Unlock()
	for _, d := range templateDirs.dirs {
		os.RemoveAll(d)
	}
}

// amduatIn runs the amduat under test with args in the working directory
// work on the store store, as cli.run does (it has no test to fail), and returns an error naming the
// command unless it exits 0.
func amduatIn(store, work string, args ...string) error {
	cmd := (&cli{cwd: work, store: store}).command(args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("amduat %s: %w: %s", strings.Join(args, " "), err, out.Bytes())
	}
	return nil
}

// emptyTemplate is a store just made by `amduat init` (SHA-256).
var emptyTemplate = storeTemplate{make: func(store, work string) error {
	return amduatIn(store, work, "init")
}}

// initStore gives c the store `amduat init` makes: a copy of emptyTemplate
// when c's store is a directory not made yet, else (a bucket, a server, a
// path taken) the command itself, which must exit 0. Tests whose subject is
// init run the command.
func (c *cli) initStore() {
	c.t.Helper()
	if filepath.IsAbs(c.store) {
		if _, err := os.Lstat(c.store); errors.Is(err, fs.ErrNotExist) {
			emptyTemplate.copyTo(c.t, c)
			return
		}
	}
	c.must(0, "init")
}
