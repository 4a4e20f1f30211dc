package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/cobra"
)

// TestHelpEveryCommand: the --help of every command says what it does,
// lists its flags under their value names (a backquoted word in a flag's
// usage must not replace them), gives an example that names a real
// command, and shows the exit code table (SPECS.md §16.2).
func TestHelpEveryCommand(t *testing.T) {
	t.Parallel()
	root := newRoot(&app{})
	var cmds []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Name() == "help" {
				continue
			}
			cmds = append(cmds, sub)
			walk(sub)
		}
	}
	walk(root)
	if len(cmds) < 40 {
		t.Fatalf("walked %d commands, want the whole tree", len(cmds))
	}
	for _, c := range cmds {
		path := strings.Fields(strings.TrimPrefix(c.CommandPath(), "amduat "))
		t.Run(strings.Join(path, "_"), func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(context.Background(), append(path, "--help"), nil, &out, &errb); code != exitOK {
				t.Fatalf("exit %d, stderr %q", code, errb.String())
			}
			help := out.String()
			says := c.Short
			if c.Long != "" {
				says, _, _ = strings.Cut(c.Long, "\n")
			}
			if says == "" {
				t.Error("no Short or Long text")
			}
			for _, want := range []string{says, "Examples:\n  ", "Exit codes:\n", "  130  interrupted", "--store string", "--json "} {
				if !strings.Contains(help, want) {
					t.Errorf("help lacks %q:\n%s", want, help)
				}
			}
			examples := 0
			for _, line := range strings.Split(c.Example, "\n") {
				for _, args := range exampleCommands(line) {
					found, _, err := root.Find(withoutGlobalFlags(args))
					if err != nil || found == root {
						t.Errorf("example %q names no command (%v)", line, err)
					}
					examples++
				}
			}
			if examples == 0 {
				t.Errorf("example %q runs no amduat command", c.Example)
			}
		})
	}
}

// exampleCommands returns the arguments of each amduat command in a shell
// line, each ending before a shell operator or command substitution.
func exampleCommands(line string) [][]string {
	var cmds [][]string
	f := strings.Fields(line)
	for i, w := range f {
		if w != "amduat" && !strings.HasSuffix(w, "$(amduat") {
			continue
		}
		var args []string
		for _, a := range f[i+1:] {
			if a == "#" {
				break
			}
			if i := strings.IndexAny(a, ");|&<>"); i >= 0 {
				if i > 0 {
					args = append(args, a[:i])
				}
				break
			}
			args = append(args, a)
		}
		cmds = append(cmds, args)
	}
	return cmds
}

// withoutGlobalFlags drops --json and --store VALUE from the front of args.
func withoutGlobalFlags(args []string) []string {
	for len(args) > 0 {
		switch {
		case args[0] == "--json" || strings.HasPrefix(args[0], "--store="):
			args = args[1:]
		case args[0] == "--store" && len(args) > 1:
			args = args[2:]
		default:
			return args
		}
	}
	return args
}

// TestClosedStdoutPipe: a command whose stdout reader goes away (`amduat
// get REF | head -c1`) is ended by SIGPIPE (shells show 141, SPECS.md
// §16.2), with nothing on stderr: no panic, no hang; the store still
// verifies.
func TestClosedStdoutPipe(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.initStore()
	big := c.write("big", bytes.Repeat([]byte("0123456789abcdef"), 1<<16)) // 1 MiB
	ref := strings.TrimSpace(c.must(0, "put", big).stdout)
	// ls needs more output than a pipe buffer holds: 1,000 artifacts.
	many := filepath.Join(c.cwd, "many")
	if err := os.Mkdir(many, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		c.write(filepath.Join("many", strconv.Itoa(i)), []byte(strconv.Itoa(i)))
	}
	c.must(0, "put", "-r", many)
	for _, args := range [][]string{{"get", ref}, {"--json", "ls"}, {"ls"}} {
		t.Run(strings.Join(args, "_"), func(t *testing.T) {
			cmd := exec.Command(amduatBin, args...)
			cmd.Dir = c.cwd
			cmd.Env = append(os.Environ(), "AMDUAT_STORE="+c.store, "GORACE=atexit_sleep_ms=20")
			var errb bytes.Buffer
			cmd.Stderr = &errb
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if _, err := out.Read(make([]byte, 1)); err != nil {
				t.Fatal(err)
			}
			out.Close()
			err = cmd.Wait()
			if errb.Len() != 0 {
				t.Errorf("stderr %q, want nothing", errb.String())
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGPIPE {
				t.Errorf("amduat %v with a closed stdout pipe: %v, want death by SIGPIPE", args, err)
			}
		})
	}
	c.must(0, "verify")
}

// TestPelBuildOutputIndexCheckedAtRun: pel build cannot know how many
// outputs a node has, so a root naming an output the node lacks builds as
// valid (as its help and SPECS.md §16.4 say) and the run ends
// INVALID_PROGRAM with diagnostic 0x000F, exit 12.
func TestPelBuildOutputIndexCheckedAtRun(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.initStore()
	src := c.write("p.json", []byte(`{"nodes":[{"id":1,"op":"pel.bytes.const","version":1,"params":{"text":"x"}}],"roots":[{"node":1,"output":5}]}`))
	var b struct {
		Ref     string `json:"ref"`
		Size    int    `json:"size"`
		TypeTag int    `json:"type_tag"`
		Nodes   int    `json:"nodes"`
		Roots   int    `json:"roots"`
		Valid   bool   `json:"valid"`
	}
	r := c.must(0, "--json", "pel", "build", "--strict", src)
	oneJSON(t, r.stdout, &b)
	if !b.Valid || r.stderr != "" {
		t.Fatalf("build: %+v, stderr %q; want valid, no warning", b, r.stderr)
	}
	r = c.must(12, "pel", "run", "--program", b.Ref)
	if !strings.Contains(r.stdout, "code 0x0000000f root 0: node 1 has 1 outputs, output index 5 out of range") {
		t.Errorf("run stdout %q lacks the 0x000F diagnostic", r.stdout)
	}
	oneErrorLine(t, r, "pel run")
}

// TestStoreURLUsage: a --store (or --from/--to) value that looks like a URL
// but names no store amduat can open is a usage error (exit 2, SPECS.md
// §16.2), one line naming the value, and a JSON error object under --json;
// nothing is created.
func TestStoreURLUsage(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for _, store := range []string{"http://", "https:///x", "ftp://host/dir", "s3://"} {
		for _, args := range [][]string{{"ls"}, {"init"}, {"put", "-"}, {"--json", "has", "00011f1d4ea728bc"}} {
			t.Run(store+"_"+args[len(args)-1], func(t *testing.T) {
				r := c.must(exitUsage, append([]string{"--store", store}, args...)...)
				cmd := args[0]
				if cmd == "--json" {
					cmd = args[1]
					var e struct {
						Error   string `json:"error"`
						Code    int    `json:"code"`
						Command string `json:"command"`
					}
					oneJSON(t, r.stdout, &e)
					if e.Code != exitUsage || e.Command != cmd {
						t.Errorf("JSON error %+v", e)
					}
				}
				oneErrorLine(t, r, cmd)
				if !strings.Contains(r.stderr, `store "`+store) && !strings.Contains(r.stderr, "store "+store) {
					t.Errorf("stderr %q does not name the store %s", r.stderr, store)
				}
			})
		}
	}
	r := c.must(exitUsage, "copy", "--from", "ftp://host/dir", "--to", c.store, "--all")
	oneErrorLine(t, r, "copy")
	if entries, err := os.ReadDir(c.cwd); err != nil || len(entries) != 0 {
		t.Errorf("the working directory holds %v (%v), want nothing created", entries, err)
	}
}

// TestStoreErrorsSayItOnce: the no-store and store-exists errors are one
// plain sentence with exit 7, not the sentence followed by the sentinel's
// own words ("…: no store", "…: store exists").
func TestStoreErrorsSayItOnce(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ls"}, "amduat: ls: " + c.store + ": no store here (create one with `amduat init`, or point --store or AMDUAT_STORE at one)\n"},
		{[]string{"init"}, ""},
		{[]string{"init"}, "amduat: init: " + c.store + ": a store exists here already\n"},
	} {
		want := exitStore
		if tc.want == "" {
			want = exitOK
		}
		if r := c.must(want, tc.args...); want != exitOK && r.stderr != tc.want {
			t.Errorf("amduat %v: stderr %q, want %q", tc.args, r.stderr, tc.want)
		}
	}
}

// TestArgCountErrors: a wrong number of arguments is exit 2 with one line
// saying what was wanted, what was given and the command's usage line.
func TestArgCountErrors(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for _, tc := range []struct {
		args []string
		cmd  string
		want string
	}{
		{[]string{"get"}, "get", "takes 1 argument, got 0; usage: amduat get REF"},
		{[]string{"get", "a", "b"}, "get", `takes 1 argument, got 2 ("a b"); usage: amduat get REF`},
		{[]string{"init", "x"}, "init", `takes no arguments, got 1 ("x"); usage: amduat init [--hash`},
		{[]string{"import"}, "import", "takes at least 1 argument, got 0; usage: amduat import FILE..."},
		{[]string{"pin", "add", "x"}, "pin add", `takes 2 arguments, got 1 ("x"); usage: amduat pin add NAME REF`},
		{[]string{"--json", "version", "1"}, "version", `takes no arguments, got 1 ("1")`},
	} {
		t.Run(strings.Join(tc.args, "_"), func(t *testing.T) {
			r := c.must(exitUsage, tc.args...)
			oneErrorLine(t, r, tc.cmd)
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr %q lacks %q", r.stderr, tc.want)
			}
			if tc.args[0] == "--json" && !strings.Contains(r.stdout, `"code":2,"command":"version"`) {
				t.Errorf("stdout %q is not the JSON error object", r.stdout)
			}
		})
	}
}

// TestInitPlaceTaken: init, or salvage --to, where a file or a non-empty
// directory is gives exit 7 (SPECS.md §16.2) and leaves what is there alone.
func TestInitPlaceTaken(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	file := c.write("file", []byte("x"))
	full := filepath.Join(c.cwd, "full")
	if err := os.Mkdir(full, 0o755); err != nil {
		t.Fatal(err)
	}
	c.write(filepath.Join("full", "keep"), []byte("y"))
	c.must(0, "init")
	for _, dir := range []string{file, full} {
		for _, args := range [][]string{{"--store", dir, "init"}, {"salvage", "--to", dir}} {
			r := c.must(exitStore, append([]string{"--json"}, args...)...)
			cmd := args[len(args)-1]
			if args[0] == "salvage" {
				cmd = "salvage"
			}
			oneErrorLine(t, r, cmd)
			if !strings.Contains(r.stdout, `"code":7,"command":"`+cmd+`"`) || !strings.Contains(r.stderr, "new or empty directory") {
				t.Errorf("stdout %q, stderr %q: want the JSON error object, exit 7, and what is wanted", r.stdout, r.stderr)
			}
		}
	}
	if ents, err := os.ReadDir(full); err != nil || len(ents) != 1 {
		t.Errorf("init changed %s: %v %v", full, ents, err)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "x" {
		t.Errorf("init changed %s: %q %v", file, b, err)
	}
}

// TestStdoutWriteError: a command whose standard output cannot be written
// (a full disk: /dev/full) fails with exit 6 and one line naming the
// cause, in text and JSON mode, instead of succeeding silently (or, for
// has with a missing reference, answering 1 with the answer lost).
func TestStdoutWriteError(t *testing.T) {
	t.Parallel()
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /dev/full:", err)
	}
	defer full.Close()
	c := newCLI(t)
	c.initStore()
	file := c.write("f", []byte("x"))
	c.must(0, "pin", "add", "p", strings.TrimSpace(c.must(0, "put", file).stdout))
	for _, args := range [][]string{
		{"version"}, {"du"}, {"pin", "ls"}, {"has", "0001aaaa000000000000000000000000000000000000000000000000000000000000"}, {"hash", file}, {"pel", "seed", "--list"}, {"--json", "du"}, {"put", "--help"},
	} {
		t.Run(strings.Join(args, "_"), func(t *testing.T) {
			cmd := exec.Command(amduatBin, args...)
			cmd.Dir = c.cwd
			cmd.Env = append(os.Environ(), "AMDUAT_STORE="+c.store, "GORACE=atexit_sleep_ms=20")
			var errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = full, &errb
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitIO {
				t.Fatalf("amduat %v > /dev/full: %v, want exit %d; stderr %q", args, err, exitIO, errb.String())
			}
			if lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "no space left on device") {
				t.Errorf("stderr %q: want one line naming the cause", errb.String())
			}
		})
	}
}

// TestCommandGroups: a command group (the root, pel, pin, pel cache, …)
// given an unknown subcommand is a usage error naming it and the known
// ones; given none it prints its help (exit 0), but under --json, where
// stdout holds only JSON, it is a usage error object.
func TestCommandGroups(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for _, tc := range []struct {
		args []string
		code int
		cmd  string // the error line's command ("-": no error line)
		want string
	}{
		{[]string{"pel", "bogus"}, exitUsage, "pel", `unknown command "bogus" for "amduat pel" (want one of: build, cache, run, seed, show, verify)`},
		{[]string{"pel", "cache", "bogus"}, exitUsage, "pel cache", `unknown command "bogus" for "amduat pel cache" (want one of: salt)`},
		{[]string{"conformance", "nope"}, exitUsage, "conformance", `unknown command "nope"`},
		{[]string{"--json", "pel"}, exitUsage, "pel", `a command is needed: one of build, cache, run, seed, show, verify`},
		{[]string{"--json"}, exitUsage, "", `a command is needed: one of bench,`},
		{[]string{"help", "nosuch"}, exitUsage, "help", `no help topic "nosuch"`},
		{[]string{"help", "pel", "run"}, exitOK, "-", ""},
		{[]string{"pel"}, exitOK, "-", ""},
		{[]string{}, exitOK, "-", ""},
	} {
		t.Run(strings.Join(tc.args, "_"), func(t *testing.T) {
			r := c.must(tc.code, tc.args...)
			if tc.cmd == "-" {
				if r.stderr != "" || !strings.Contains(r.stdout, "Usage:") {
					t.Errorf("stdout %q, stderr %q: want the help", r.stdout, r.stderr)
				}
				return
			}
			if tc.cmd != "" {
				oneErrorLine(t, r, tc.cmd)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr %q lacks %q", r.stderr, tc.want)
			}
			if tc.args[0] == "--json" {
				var e struct {
					Error   string `json:"error"`
					Code    int    `json:"code"`
					Command string `json:"command"`
				}
				oneJSON(t, r.stdout, &e)
				if e.Code != exitUsage || e.Command != tc.cmd {
					t.Errorf("JSON %+v", e)
				}
			} else if r.stdout != "" {
				t.Errorf("stdout %q, want nothing", r.stdout)
			}
		})
	}
}

// TestFlagValueErrors: a bad numeric or duration flag value is exit 2 with
// one line in the user's terms, never the parser's (strconv.ParseUint…).
func TestFlagValueErrors(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for _, tc := range []struct {
		args []string
		cmd  string
		want string
	}{
		{[]string{"pel", "run", "--program", "00011f1d4ea728bc", "--max-nodes", "-1"}, "pel run", `--max-nodes "-1": want a whole number >= 0`},
		{[]string{"pel", "run", "--program", "00011f1d4ea728bc", "--max-output-bytes", "99999999999999999999999"}, "pel run", `--max-output-bytes "99999999999999999999999": want a number of bytes that fits a uint64`},
		{[]string{"pel", "run", "--program", "00011f1d4ea728bc", "--max-memory", "12X"}, "pel run", `--max-memory "12X": want a number of bytes that fits a uint64, optionally with K, M, G or T`},
		{[]string{"pel", "run", "--program", "00011f1d4ea728bc", "--jobs", "x"}, "pel run", `--jobs "x": want a whole number`},
		{[]string{"gc", "--keep-within", "bogus"}, "gc", `--keep-within "bogus": want a duration such as 30s, 5m or 168h`},
	} {
		t.Run(strings.Join(tc.args[:2], "_")+"_"+tc.args[len(tc.args)-2], func(t *testing.T) {
			r := c.must(exitUsage, tc.args...)
			oneErrorLine(t, r, tc.cmd)
			if !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "strconv") {
				t.Errorf("stderr %q: want %q and no parser detail", r.stderr, tc.want)
			}
		})
	}
}
