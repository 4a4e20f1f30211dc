package main

import (
	"strings"
	"testing"
)

// TestExcludeRules pins the gitignore subset put -r --exclude implements
// (gitignore(5)); each case is a pattern list and paths it must exclude
// or keep ("dir/" marks a directory).
func TestExcludeRules(t *testing.T) {
	cases := []struct {
		patterns []string
		excluded []string
		kept     []string
	}{
		{[]string{"*.o"}, []string{"a.o", "src/x/b.o"}, []string{"a.c", "o", "a.o.c"}},
		{[]string{"build/"}, []string{"build/", "src/build/"}, []string{"build", "src/build"}},
		{[]string{"/TODO"}, []string{"TODO"}, []string{"src/TODO"}},
		{[]string{"doc/*.txt"}, []string{"doc/a.txt"}, []string{"doc/x/a.txt", "src/doc/a.txt"}},
		{[]string{"**/foo"}, []string{"foo", "a/b/foo"}, []string{"foo2"}},
		{[]string{"a/**/b"}, []string{"a/b", "a/x/b", "a/x/y/b"}, []string{"b", "x/a/b"}},
		{[]string{"abc/**"}, []string{"abc/x", "abc/x/y"}, []string{"abc", "abc/"}},
		{[]string{"*.log", "!keep.log"}, []string{"a.log"}, []string{"keep.log", "x/keep.log"}},
		{[]string{"!keep.log", "*.log"}, []string{"keep.log"}, nil},
		{[]string{"# comment", "", "  ", "x"}, []string{"x"}, []string{"# comment"}},
		{[]string{`\#lit`, `\!bang`}, []string{"#lit", "!bang"}, nil},
		{[]string{"[!a]?"}, []string{"bc"}, []string{"ac", "b"}},
		{[]string{"tail  "}, []string{"tail"}, []string{"tail  "}},
		{[]string{`sp\ `}, []string{"sp "}, []string{"sp"}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.patterns, ","), func(t *testing.T) {
			var x excluder
			for _, p := range c.patterns {
				if err := x.add(p); err != nil {
					t.Fatal(err)
				}
			}
			check := func(p string, want bool) {
				dir := strings.HasSuffix(p, "/")
				if got := x.excluded(strings.TrimSuffix(p, "/"), dir); got != want {
					t.Errorf("%q excluded = %v, want %v", p, got, want)
				}
			}
			for _, p := range c.excluded {
				check(p, true)
			}
			for _, p := range c.kept {
				check(p, false)
			}
		})
	}
	var x excluder
	for _, bad := range []string{"a[", "/"} {
		if err := x.add(bad); err == nil {
			t.Errorf("pattern %q accepted", bad)
		}
	}
}
