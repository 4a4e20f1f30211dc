package policy

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/policy.canonical.json")

// TestGolden loads the example policy and compares its canonical bytes
// with testdata/policy.canonical.json (rewritten only by go test -run TestGolden -update).
func TestGolden(t *testing.T) {
	for _, path := range []string{"/usr/bin/wc", "/bin/sh", "/usr/bin/python3", "/bin/cat"} {
		if _, err := os.Stat(path); err != nil {
			t.Skipf("the example names %s, absent here", path)
		}
	}
	p, err := Load("testdata/policy.json")
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("testdata/policy.canonical.json", append(p.Canonical(), '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("testdata/policy.canonical.json")
	if err != nil {
		t.Fatal(err)
	}
	want = bytes.TrimSuffix(want, []byte("\n"))
	if got := p.Canonical(); !bytes.Equal(got, want) {
		t.Fatalf("canonical bytes\n got %s\nwant %s", got, want)
	}
	// The canonical bytes are a policy too, with the same canonical bytes.
	q, err := Parse(p.Canonical())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(q.Canonical(), p.Canonical()) || q.Digest() != p.Digest() || len(p.Digest()) != 64 {
		t.Fatal("canonical bytes are not a fixed point")
	}
}

func TestSamePolicyWrittenTwoWays(t *testing.T) {
	a, err := Parse([]byte(`{"version":1,"http":{"hosts":[{"host":"Example.COM.","schemes":["https","http"]}]}}`))
	if err == nil {
		t.Fatal("a trailing dot in a pattern must be refused")
	}
	a, err = Parse([]byte(`{"version":1,"http":{"hosts":[{"host":"Example.COM","schemes":["https","http"]}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse([]byte(`{"executors":[],"http":{"hosts":[{"max_response_bytes":16777216,"timeout_ms":30000,"schemes":["http","https"],"host":"example.com"}]},"version":1,"exec":{"commands":[]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Canonical(), b.Canonical()) {
		t.Fatalf("\n%s\n%s", a.Canonical(), b.Canonical())
	}
	c, _ := Parse([]byte(`{"version":1,"http":{"hosts":[{"host":"example.com","timeout_ms":30001}]}}`))
	if c.Digest() == a.Digest() {
		t.Fatal("a changed limit must change the digest")
	}
}

func TestNameResolvedAtLoad(t *testing.T) {
	want, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh in PATH")
	}
	want, _ = filepath.Abs(want)
	p, err := Parse([]byte(`{"version":1,"exec":{"commands":[{"name":"sh","path":"sh"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.Command("sh")
	if err != nil || c.Path != want {
		t.Fatalf("path %q, want %q (%v)", c.Path, want, err)
	}
	if !strings.Contains(string(p.Canonical()), `"path":"`+want+`"`) {
		t.Fatalf("canonical bytes do not record the resolved path: %s", p.Canonical())
	}
}

func TestFieldErrors(t *testing.T) {
	cases := []struct{ doc, field string }{
		{`{}`, "version"},
		{`{"version":2}`, "version"},
		{`{"version":1,"http":{"hosts":[{"host":""}]}}`, "http.hosts[0].host"},
		{`{"version":1,"http":{"hosts":[{"host":"a.com"},{"host":"a.com:0"}]}}`, "http.hosts[1].host"},
		{`{"version":1,"http":{"hosts":[{"host":"a.com:99999"}]}}`, "http.hosts[0].host"},
		{`{"version":1,"http":{"hosts":[{"host":"a.com:08"}]}}`, "http.hosts[0].host"},
		{`{"version":1,"http":{"hosts":[{"host":"a b.com"}]}}`, "http.hosts[0].host"},
		{`{"version":1,"http":{"hosts":[{"host":"*.1.2.3.4"}]}}`, "http.hosts[0].host"},
		{`{"version":1,"http":{"hosts":[{"host":"::1"}]}}`, "http.hosts[0].host"},
		{`{"version":1,"http":{"hosts":[{"host":"[::1"}]}}`, "http.hosts[0].host"},
		{`{"version":1,"http":{"hosts":[{"host":"[a.com]"}]}}`, "http.hosts[0].host"},
		{`{"version":1,"http":{"hosts":[{"host":"a.*.com"}]}}`, "http.hosts[0].host"},
		{`{"version":1,"http":{"hosts":[{"host":"a.com","schemes":["ftp"]}]}}`, "http.hosts[0].schemes[0]"},
		{`{"version":1,"http":{"hosts":[{"host":"a.com","schemes":[]}]}}`, "http.hosts[0].schemes"},
		{`{"version":1,"http":{"hosts":[{"host":"a.com","schemes":["http","http"]}]}}`, "http.hosts[0].schemes[1]"},
		{`{"version":1,"http":{"hosts":[{"host":"a.com","timeout_ms":-1}]}}`, "http.hosts[0].timeout_ms"},
		{`{"version":1,"http":{"hosts":[{"host":"a.com","timeout_ms":3600001}]}}`, "http.hosts[0].timeout_ms"},
		{`{"version":1,"http":{"hosts":[{"host":"a.com","max_response_bytes":-5}]}}`, "http.hosts[0].max_response_bytes"},
		{`{"version":1,"exec":{"commands":[{"name":"Bad","path":"/bin/sh"}]}}`, "exec.commands[0].name"},
		{`{"version":1,"exec":{"commands":[{"name":"sh","path":"bin/sh"}]}}`, "exec.commands[0].path"},
		{`{"version":1,"exec":{"commands":[{"name":"sh","path":""}]}}`, "exec.commands[0].path"},
		{`{"version":1,"exec":{"commands":[{"name":"sh","path":"/no/such/file"}]}}`, "exec.commands[0].path"},
		{`{"version":1,"exec":{"commands":[{"name":"sh","path":"no-such-command-anywhere"}]}}`, "exec.commands[0].path"},
		{`{"version":1,"exec":{"commands":[{"name":"sh","path":"/etc"}]}}`, "exec.commands[0].path"},
		{`{"version":1,"exec":{"commands":[{"name":"sh","path":"/bin/sh","env":["A-B"]}]}}`, "exec.commands[0].env[0]"},
		{`{"version":1,"exec":{"commands":[{"name":"sh","path":"/bin/sh","pass_env":["A","A"]}]}}`, "exec.commands[0].pass_env[1]"},
		{`{"version":1,"exec":{"commands":[{"name":"sh","path":"/bin/sh"},{"name":"sh","path":"/bin/sh"}]}}`, "exec.commands[1].name"},
		{`{"version":1,"executors":[{"name":"http","path":"/bin/sh"}]}`, "executors[0].name"},
		{`{"version":1,"executors":[{"name":"x","path":"/bin/sh","args":["a\u0000"]}]}`, "executors[0].args[0]"},
		{`{"version":1,"executors":[{"name":"x","path":"/bin/sh","max_frame_bytes":268435457}]}`, "executors[0].max_frame_bytes"},
		{`{"version":1,"executors":[{"name":"x","path":"/bin/sh","start_timeout_ms":-1}]}`, "executors[0].start_timeout_ms"},
		{`{"version":1,"executors":[{"name":"x","path":"/bin/sh"},{"name":"x","path":"/bin/sh"}]}`, "executors[1].name"},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.doc))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: err %v, want field %s", c.doc, err, c.field)
		}
	}
	for _, doc := range []string{``, `[]`, `{"version":1,"hosts":[]}`, `{"version":1} {}`, `{"version":1,`, `{"version":"1"}`} {
		if _, err := Parse([]byte(doc)); !errors.Is(err, ErrSyntax) {
			t.Errorf("%q: err %v, want ErrSyntax", doc, err)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("no error for a missing file")
	}
	big := filepath.Join(dir, "big.json")
	os.WriteFile(big, bytes.Repeat([]byte(" "), MaxFileSize+1), 0o600)
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("err %v for an oversized file", err)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"version":1,"http":{"hosts":[{"host":"a.com","timeout_ms":-1}]}}`), 0o600)
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "http.hosts[0].timeout_ms") {
		t.Errorf("err %v does not name the file and the field", err)
	}
}

func TestAllowHTTP(t *testing.T) {
	p, err := Parse([]byte(`{"version":1,"http":{"hosts":[
		{"host":"api.example.com"},
		{"host":"*.example.org:8443","schemes":["http","https"],"timeout_ms":5},
		{"host":"127.0.0.1:*","schemes":["http"]},
		{"host":"[::1]:8080","schemes":["http"]}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		scheme, host, port string
		entry              int // -1 denied
	}{
		{"https", "api.example.com", "", 0},
		{"https", "API.EXAMPLE.COM", "443", 0},
		{"https", "api.example.com.", "", 0},
		{"http", "api.example.com", "", -1},
		{"https", "api.example.com", "8443", -1},
		{"https", "x.api.example.com", "", -1},
		{"https", "a.example.org", "8443", 1},
		{"http", "a.b.example.org", "8443", 1},
		{"https", "example.org", "8443", -1},
		{"https", "a.example.org", "", -1},
		{"https", "evilexample.org", "8443", -1},
		{"http", "127.0.0.1", "1", 2},
		{"http", "127.0.0.1", "", 2},
		{"https", "127.0.0.1", "1", -1},
		{"http", "127.0.0.2", "1", -1},
		{"http", "::1", "8080", 3},
		{"http", "0:0::1", "8080", 3},
		{"http", "::1", "8081", -1},
		{"ftp", "api.example.com", "", -1},
	}
	for _, c := range cases {
		h, err := p.AllowHTTP(c.scheme, c.host, c.port)
		if c.entry < 0 {
			var de *DeniedError
			if !errors.As(err, &de) {
				t.Errorf("%s://%s:%s: allowed by %v, want denied", c.scheme, c.host, c.port, h)
			}
			continue
		}
		if err != nil || h != &p.HTTP.Hosts[c.entry] {
			t.Errorf("%s://%s:%s: %v %v, want entry %d", c.scheme, c.host, c.port, h, err, c.entry)
		}
	}
	if _, err := Empty().AllowHTTP("https", "example.com", ""); err == nil {
		t.Error("the empty policy allows a host")
	}
	if _, err := Empty().Command("sh"); err == nil {
		t.Error("the empty policy allows a command")
	}
	if _, err := Empty().Executor("x"); err == nil {
		t.Error("the empty policy allows an executor")
	}
}
