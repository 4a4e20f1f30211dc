package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

// excluder decides which paths `put -r` leaves out, from patterns in
// gitignore syntax (gitignore(5)): blank lines and lines starting with #
// are ignored; a trailing "/" matches directories only; a leading "!"
// re-includes; a pattern with a "/" other than a trailing one is anchored
// at the top of the directory put (a leading "/" only anchors), one
// without matches a name at any depth; "*", "?" and "[...]" ("[!...]"
// negates) match within one path component; "**" as a whole component
// matches any number of components ("a/**" everything inside a, not a
// itself); "\" escapes the next character. The last matching pattern
// decides. An excluded directory is not read, so nothing under it can be
// re-included (as in git).
//
// Hand-written rather than a dependency: go-git's matcher would add five
// modules and move golang.org/x/exp under Pebble, and the small
// stand-alone module unmaintained since 2021; the rules fit in this file
// and TestExcludeRules pins them.
type excluder struct {
	rules []ignoreRule
}

type ignoreRule struct {
	pattern  string // as given, for messages
	negate   bool
	dirOnly  bool
	anchored bool
	segs     []string
}

// add parses one pattern line; a blank or comment line adds nothing.
func (x *excluder) add(line string) error {
	orig := line
	line = strings.TrimSuffix(line, "\r")
	line = trimTrailingSpaces(line)
	if line == "" || strings.HasPrefix(line, "#") {
		return nil
	}
	r := ignoreRule{pattern: orig}
	if strings.HasPrefix(line, "!") {
		r.negate, line = true, line[1:]
	}
	if strings.HasSuffix(line, "/") {
		r.dirOnly, line = true, strings.TrimRight(line, "/")
	}
	if strings.Contains(line, "/") {
		r.anchored, line = true, strings.TrimLeft(line, "/")
	}
	if line == "" {
		return fmt.Errorf("exclude pattern %q matches nothing", orig)
	}
	for _, s := range strings.Split(line, "/") {
		if s == "" {
			continue
		}
		s = fnmatchToGo(s)
		if s != "**" {
			if _, err := path.Match(s, ""); err != nil {
				return fmt.Errorf("exclude pattern %q: %w", orig, err)
			}
		}
		r.segs = append(r.segs, s)
	}
	x.rules = append(x.rules, r)
	return nil
}

// addFile adds every line of the file name (gitignore syntax).
func (x *excluder) addFile(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	return x.addLines(f)
}

func (x *excluder) addLines(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if err := x.add(sc.Text()); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
	}
	return sc.Err()
}

// excluded reports whether rel ('/'-separated, relative to the directory
// put) is left out.
func (x *excluder) excluded(rel string, isDir bool) bool {
	if x == nil || len(x.rules) == 0 {
		return false
	}
	parts := strings.Split(rel, "/")
	out := false
	for _, r := range x.rules {
		if r.dirOnly && !isDir {
			continue
		}
		var ok bool
		if r.anchored {
			ok = matchSegs(r.segs, parts)
		} else {
			ok = matchSegs(r.segs, parts[len(parts)-1:])
		}
		if ok {
			out = !r.negate
		}
	}
	return out
}

// matchSegs matches path components against pattern components, "**"
// standing for any number of components (at least one when it ends the
// pattern).
func matchSegs(pat, parts []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			if len(pat) == 1 {
				return len(parts) >= 1
			}
			for i := 0; i <= len(parts); i++ {
				if matchSegs(pat[1:], parts[i:]) {
					return true
				}
			}
			return false
		}
		if len(parts) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], parts[0]); !ok {
			return false
		}
		pat, parts = pat[1:], parts[1:]
	}
	return len(parts) == 0
}

// fnmatchToGo rewrites gitignore's bracket negation "[!" as path.Match's
// "[^".
func fnmatchToGo(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		b.WriteByte(c)
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		case c == '[' && i+1 < len(s) && s[i+1] == '!':
			b.WriteByte('^')
			i++
		}
	}
	return b.String()
}

// trimTrailingSpaces removes trailing spaces that are not escaped with a
// backslash.
func trimTrailingSpaces(s string) string {
	for strings.HasSuffix(s, " ") && !strings.HasSuffix(s, "\\ ") {
		s = s[:len(s)-1]
	}
	return s
}

// errExcludeNeedsR: --exclude and --exclude-from apply to the files put -r
// finds.
var errExcludeNeedsR = errors.New("--exclude and --exclude-from need -r (they filter the files under a DIR)")
