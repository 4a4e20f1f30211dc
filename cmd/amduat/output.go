package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// Output files (-o) and temporary files (SPECS.md §16.2, "Output files"):
//
//   - -o naming a regular file, or nothing yet, is written through a
//     temporary file beside it, synced and renamed into place: a failure
//     leaves the old file as it was.
//   - -o naming a symbolic link writes through it: the link stays and the
//     file it names (after every link in the chain) is written as above.
//   - -o naming anything else (a device such as /dev/null, a FIFO) is
//     opened and written in place; it is never replaced.
//   - every temporary file the command makes (spools of standard input,
//     the temporary output file) is removed on error, on SIGINT and on
//     SIGTERM, before the process exits.

// maxOutputLinks bounds the symbolic links followed from an -o path, as
// the kernel's ELOOP does.
const maxOutputLinks = 40

// outputTarget follows the symbolic links of path (a dangling link names
// the file it would create) and returns the final path and what is there
// now (nil when nothing is).
func outputTarget(path string) (string, os.FileInfo, error) {
	for i := 0; i <= maxOutputLinks; i++ {
		st, err := os.Lstat(path)
		if errors.Is(err, os.ErrNotExist) {
			return path, nil, nil
		}
		if err != nil {
			return "", nil, err
		}
		if st.Mode()&os.ModeSymlink == 0 {
			return path, st, nil
		}
		link, err := os.Readlink(path)
		if err != nil {
			return "", nil, err
		}
		if !filepath.IsAbs(link) {
			link = filepath.Join(filepath.Dir(path), link)
		}
		path = link
	}
	return "", nil, fmt.Errorf("more than %d symbolic links", maxOutputLinks)
}

// checkOutputPath fails, before anything is read, when path cannot be
// written: it names a directory, or its directory does not exist.
func checkOutputPath(path string) error {
	if strings.HasSuffix(path, "/") || strings.HasSuffix(path, string(filepath.Separator)) {
		return fail(exitUsage, path, errors.New("is a directory path; -o needs a file name"))
	}
	target, st, err := outputTarget(path)
	if err != nil {
		return fail(exitIO, path, unwrapPathError(err))
	}
	if st != nil && st.IsDir() {
		return fail(exitUsage, path, errors.New("is a directory; -o needs a file name"))
	}
	if st != nil && st.Mode()&os.ModeSocket != 0 {
		return fail(exitUsage, path, errors.New("is a socket; -o needs a file, a device or a FIFO"))
	}
	dir := filepath.Dir(target)
	dst, err := os.Stat(dir)
	if err != nil {
		return fail(exitIO, path, fmt.Errorf("directory %s: %w", dir, unwrapPathError(err)))
	}
	if !dst.IsDir() {
		return fail(exitIO, path, fmt.Errorf("%s is not a directory", dir))
	}
	return nil
}

// createOutput opens path for writing as the rules above say. commit makes
// what was written visible (sync and rename, or sync where a device allows
// it); abort removes the temporary file and leaves path as it was.
func createOutput(path string) (f *os.File, commit func() error, abort func(), err error) {
	if err := checkOutputPath(path); err != nil {
		return nil, nil, nil, err
	}
	target, st, err := outputTarget(path)
	if err != nil {
		return nil, nil, nil, fail(exitIO, path, unwrapPathError(err))
	}
	if st != nil && !st.Mode().IsRegular() {
		// A device or a FIFO: written in place, never replaced.
		f, err := os.OpenFile(target, os.O_WRONLY, 0)
		if err != nil {
			return nil, nil, nil, fail(exitIO, path, unwrapPathError(err))
		}
		commit = func() error {
			if err := f.Close(); err != nil {
				return fail(exitIO, path, err)
			}
			return nil
		}
		return f, commit, func() { f.Close() }, nil
	}
	tmp, release, err := createTemp(filepath.Dir(target), "."+filepath.Base(target)+".amduat-*")
	if err != nil {
		return nil, nil, nil, fail(exitIO, path, unwrapPathError(err))
	}
	abort = func() { tmp.Close(); release() }
	commit = func() error {
		defer release()
		if err := tmp.Chmod(0o644); err != nil {
			tmp.Close()
			return fail(exitIO, path, err)
		}
		if err := tmp.Sync(); err != nil {
			tmp.Close()
			return fail(exitIO, path, err)
		}
		if err := tmp.Close(); err != nil {
			return fail(exitIO, path, err)
		}
		if err := os.Rename(tmp.Name(), target); err != nil {
			return fail(exitIO, path, unwrapPathError(err))
		}
		return nil
	}
	return tmp, commit, abort, nil
}

// writeOutput copies r into path by createOutput's rules; on any error path
// is left as it was.
func writeOutput(ctx context.Context, path string, r io.Reader) error {
	f, commit, abort, err := createOutput(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, ctxReader{ctx, r}); err != nil {
		abort()
		return failAuto(path, err)
	}
	return commit()
}

// temps holds the temporary files in use, removed by removeTemps when the
// process is interrupted.
var temps struct {
	mu    sync.Mutex
	paths map[string]struct{}
}

// createTemp creates a temporary file as os.CreateTemp does and records it;
// release removes it (if it is still there) and forgets it.
func createTemp(dir, pattern string) (f *os.File, release func(), err error) {
	f, err = os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, nil, err
	}
	name := f.Name()
	temps.mu.Lock()
	if temps.paths == nil {
		temps.paths = make(map[string]struct{})
	}
	temps.paths[name] = struct{}{}
	temps.mu.Unlock()
	var once sync.Once
	release = func() {
		once.Do(func() {
			temps.mu.Lock()
			delete(temps.paths, name)
			temps.mu.Unlock()
			os.Remove(name)
		})
	}
	return f, release, nil
}

// removeTemps removes every temporary file still recorded and returns their
// paths in order (the exit path of an interrupted command).
func removeTemps() []string {
	temps.mu.Lock()
	defer temps.mu.Unlock()
	var out []string
	for name := range temps.paths {
		os.Remove(name)
		out = append(out, name)
	}
	sort.Strings(out)
	temps.paths = nil
	return out
}

// ctxReader stops a copy at the next read once ctx is done, so that a spool
// of a long pipe ends when the command is interrupted.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
