// Package policy reads the effect policy file (SPECS.md §23.1): the JSON
// document, supplied by whoever runs plans (the server's operator, the CLI
// user) and never by a plan, that says which HTTP hosts, which commands and
// which external executors effects may reach, and within which time and
// size limits. A missing entry denies: the empty policy allows nothing.
//
// A loaded policy has canonical bytes (defaults filled in, command names
// resolved to the absolute paths found at load time), so that a ledger can
// record the policy a plan ran under and a replay can name a changed one.
package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/amduat/amduat/plan/effect/internal/fxutil"
)

// Version is the only policy file version this package reads.
const Version = 1

// Defaults and bounds of the limits (SPECS.md §23.1).
const (
	DefaultHTTPTimeoutMillis       = 30_000
	DefaultHTTPMaxResponse         = 16 << 20
	DefaultExecTimeoutMillis       = 60_000
	DefaultExecMaxOutput           = 16 << 20
	DefaultExtTimeoutMillis        = 60_000
	DefaultExtStartMillis          = 10_000
	DefaultExtMaxFrame             = 16 << 20
	MaxTimeoutMillis               = 3_600_000
	MaxSizeLimit             int64 = 1 << 40
	MaxExtFrame              int64 = 256 << 20
	// MaxFileSize is the largest policy file Load reads.
	MaxFileSize = 1 << 20
)

// Policy is a loaded, validated policy. Its fields hold every default
// filled in; it is not modified after Load.
type Policy struct {
	Version   int        `json:"version"`
	HTTP      HTTP       `json:"http"`
	Exec      Exec       `json:"exec"`
	Executors []Executor `json:"executors"`

	canonical []byte
}

// HTTP lists the hosts the http effect may reach, in file order; the first
// entry that matches a URL decides.
type HTTP struct {
	Hosts []Host `json:"hosts"`
}

// Host is one allowed host pattern with its limits.
type Host struct {
	// Pattern is "name", "*.name" (any subdomain of name, not name itself),
	// an IPv4 literal or a bracketed IPv6 literal, optionally followed by
	// ":port" or ":*". Without a port only the scheme's default port (80,
	// 443) matches.
	Pattern          string   `json:"host"`
	Schemes          []string `json:"schemes"`
	TimeoutMillis    int64    `json:"timeout_ms"`
	MaxResponseBytes int64    `json:"max_response_bytes"`

	wildcard bool
	name     string
	port     string // "" default port, "*" any, else digits
}

// Exec lists the commands the exec effect may run.
type Exec struct {
	Commands []Command `json:"commands"`
}

// Command is one allowed command. Path is absolute: a bare name in the file
// is resolved through PATH when the policy is loaded, and the canonical
// bytes record what it resolved to.
type Command struct {
	Name string `json:"name"`
	Path string `json:"path"`
	// Env lists the variables a plan's params may set.
	Env []string `json:"env"`
	// PassEnv lists the variables copied from the environment of the
	// process running the plan when they are set there.
	PassEnv        []string `json:"pass_env"`
	TimeoutMillis  int64    `json:"timeout_ms"`
	MaxOutputBytes int64    `json:"max_output_bytes"`
}

// Executor is one external executor speaking amduat-executor/1 (§23.5).
type Executor struct {
	Name               string   `json:"name"`
	Path               string   `json:"path"`
	Args               []string `json:"args"`
	PassEnv            []string `json:"pass_env"`
	TimeoutMillis      int64    `json:"timeout_ms"`
	StartTimeoutMillis int64    `json:"start_timeout_ms"`
	MaxFrameBytes      int64    `json:"max_frame_bytes"`
	// HonoursKeys says the executor's provider deduplicates by the
	// idempotency key, so that a call interrupted by a crash may be resumed
	// with the same key.
	HonoursKeys bool `json:"honours_keys"`
}

// FieldError names the field of the policy file that is wrong.
type FieldError struct {
	Field string // a path such as "http.hosts[2].timeout_ms"
	Msg   string
}

func (e *FieldError) Error() string { return "policy: " + e.Field + ": " + e.Msg }

// ErrSyntax wraps every failure to read the file as JSON of the right shape.
var ErrSyntax = errors.New("policy: not a policy document")

// Load reads and validates the policy file at path. Errors name the file and
// the field.
func Load(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", path, err)
	}
	if len(b) > MaxFileSize {
		return nil, fmt.Errorf("policy %s: larger than %d bytes", path, MaxFileSize)
	}
	p, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// Parse reads and validates a policy document.
func Parse(b []byte) (*Policy, error) {
	// The file's own shape: fields that may be omitted are pointers or
	// zero, so that defaults can be told from explicit values.
	var raw Policy
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&raw); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("%w: offset %d: %v", ErrSyntax, se.Offset, err)
		}
		return nil, fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the JSON object", ErrSyntax)
	}
	p := &raw
	if p.Version != Version {
		return nil, &FieldError{"version", fmt.Sprintf("got %d, want %d", p.Version, Version)}
	}
	if p.HTTP.Hosts == nil {
		p.HTTP.Hosts = []Host{}
	}
	for i := range p.HTTP.Hosts {
		if err := p.HTTP.Hosts[i].check(fmt.Sprintf("http.hosts[%d]", i)); err != nil {
			return nil, err
		}
	}
	if p.Exec.Commands == nil {
		p.Exec.Commands = []Command{}
	}
	seen := map[string]string{}
	for i := range p.Exec.Commands {
		field := fmt.Sprintf("exec.commands[%d]", i)
		c := &p.Exec.Commands[i]
		if err := c.check(field); err != nil {
			return nil, err
		}
		if prev, dup := seen[c.Name]; dup {
			return nil, &FieldError{field + ".name", fmt.Sprintf("%q is also %s", c.Name, prev)}
		}
		seen[c.Name] = field
	}
	if p.Executors == nil {
		p.Executors = []Executor{}
	}
	seen = map[string]string{}
	for i := range p.Executors {
		field := fmt.Sprintf("executors[%d]", i)
		x := &p.Executors[i]
		if err := x.check(field); err != nil {
			return nil, err
		}
		if prev, dup := seen[x.Name]; dup {
			return nil, &FieldError{field + ".name", fmt.Sprintf("%q is also %s", x.Name, prev)}
		}
		seen[x.Name] = field
	}
	c, err := fxutil.Canonical(p)
	if err != nil {
		return nil, fmt.Errorf("policy: canonical form: %w", err)
	}
	p.canonical = c
	return p, nil
}

// Canonical returns the policy's canonical bytes (SPECS.md §23.1): the
// validated policy with every default filled in, host patterns in their
// canonical spelling, every command path resolved and the variable-name
// sets sorted, as canonical JSON. Lists whose order means something (hosts,
// first match wins; arguments) keep their order.
func (p *Policy) Canonical() []byte { return append([]byte(nil), p.canonical...) }

// Digest is the lower-case hex SHA-256 of Canonical.
func (p *Policy) Digest() string {
	s := sha256.Sum256(p.canonical)
	return hex.EncodeToString(s[:])
}

// Empty returns the policy that allows nothing.
func Empty() *Policy {
	p, err := Parse([]byte(`{"version":1}`))
	if err != nil {
		panic(err)
	}
	return p
}

// DeniedError says the policy forbids a host, command or executor.
type DeniedError struct {
	What string // "host", "command", "executor", "env"
	Name string
	Why  string
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("policy denies %s %q: %s", e.What, e.Name, e.Why)
}

// AllowHTTP returns the first host entry that allows scheme://host:port,
// where port is the URL's explicit port or "" for the scheme's default.
func (p *Policy) AllowHTTP(scheme, host, port string) (*Host, error) {
	scheme = strings.ToLower(scheme)
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if ip := net.ParseIP(host); ip != nil {
		host = ip.String()
	}
	name := host
	if port != "" {
		name = net.JoinHostPort(host, port)
	}
	if scheme != "http" && scheme != "https" {
		return nil, &DeniedError{"host", name, "scheme " + strconv.Quote(scheme) + " is not http or https"}
	}
	if port == defaultPort(scheme) {
		port = ""
	}
	for i := range p.HTTP.Hosts {
		h := &p.HTTP.Hosts[i]
		if h.matches(host, port) && contains(h.Schemes, scheme) {
			return h, nil
		}
	}
	return nil, &DeniedError{"host", scheme + "://" + name, "no http.hosts entry allows it"}
}

// Command returns the command named name.
func (p *Policy) Command(name string) (*Command, error) {
	for i := range p.Exec.Commands {
		if p.Exec.Commands[i].Name == name {
			return &p.Exec.Commands[i], nil
		}
	}
	return nil, &DeniedError{"command", name, "no exec.commands entry names it"}
}

// Executor returns the external executor named name.
func (p *Policy) Executor(name string) (*Executor, error) {
	for i := range p.Executors {
		if p.Executors[i].Name == name {
			return &p.Executors[i], nil
		}
	}
	return nil, &DeniedError{"executor", name, "no executors entry names it"}
}

func defaultPort(scheme string) string {
	if scheme == "https" {
		return "443"
	}
	return "80"
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (h *Host) matches(host, port string) bool {
	if h.port != "*" && h.port != port {
		return false
	}
	if h.wildcard {
		return strings.HasSuffix(host, "."+h.name)
	}
	return host == h.name
}

func (h *Host) check(field string) error {
	pat := strings.ToLower(h.Pattern)
	if pat == "" {
		return &FieldError{field + ".host", "empty"}
	}
	name, port := pat, ""
	if strings.HasPrefix(pat, "[") {
		end := strings.IndexByte(pat, ']')
		if end < 0 {
			return &FieldError{field + ".host", fmt.Sprintf("%q: unclosed '['", h.Pattern)}
		}
		name, port = pat[1:end], pat[end+1:]
		if net.ParseIP(name) == nil || !strings.Contains(name, ":") {
			return &FieldError{field + ".host", fmt.Sprintf("%q: not an IPv6 literal inside brackets", h.Pattern)}
		}
		if port != "" && !strings.HasPrefix(port, ":") {
			return &FieldError{field + ".host", fmt.Sprintf("%q: want ':port' after ']'", h.Pattern)}
		}
		port = strings.TrimPrefix(port, ":")
		name = net.ParseIP(name).String()
	} else if i := strings.LastIndexByte(pat, ':'); i >= 0 {
		name, port = pat[:i], pat[i+1:]
	}
	if port != "" && port != "*" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return &FieldError{field + ".host", fmt.Sprintf("%q: port must be 1-65535 or '*'", h.Pattern)}
		}
	}
	if !strings.HasPrefix(pat, "[") {
		if strings.HasPrefix(name, "*.") {
			h.wildcard = true
			name = name[2:]
		}
		if !validHostName(name) {
			return &FieldError{field + ".host", fmt.Sprintf("%q: not a host name, '*.' name or IP address", h.Pattern)}
		}
		if h.wildcard && net.ParseIP(name) != nil {
			return &FieldError{field + ".host", fmt.Sprintf("%q: '*.' before an IP address", h.Pattern)}
		}
	}
	h.name, h.port = name, port
	// The canonical spelling.
	switch {
	case strings.Contains(name, ":"):
		h.Pattern = "[" + name + "]"
	case h.wildcard:
		h.Pattern = "*." + name
	default:
		h.Pattern = name
	}
	if port != "" {
		h.Pattern += ":" + port
	}
	if h.Schemes == nil {
		h.Schemes = []string{"https"}
	}
	if len(h.Schemes) == 0 {
		return &FieldError{field + ".schemes", "empty: omit it for [\"https\"]"}
	}
	for j, s := range h.Schemes {
		if s != "http" && s != "https" {
			return &FieldError{fmt.Sprintf("%s.schemes[%d]", field, j), fmt.Sprintf("%q is not \"http\" or \"https\"", s)}
		}
		if contains(h.Schemes[:j], s) {
			return &FieldError{fmt.Sprintf("%s.schemes[%d]", field, j), fmt.Sprintf("%q twice", s)}
		}
	}
	if len(h.Schemes) == 2 && h.Schemes[0] == "https" {
		h.Schemes = []string{"http", "https"}
	}
	var err error
	if h.TimeoutMillis, err = timeout(field+".timeout_ms", h.TimeoutMillis, DefaultHTTPTimeoutMillis); err != nil {
		return err
	}
	h.MaxResponseBytes, err = size(field+".max_response_bytes", h.MaxResponseBytes, DefaultHTTPMaxResponse, MaxSizeLimit)
	return err
}

func validHostName(s string) bool {
	if net.ParseIP(s) != nil {
		return !strings.Contains(s, ":")
	}
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// validName is the rule for command and executor names: 1-64 bytes of
// [a-z0-9_.-], starting with a letter.
func validName(s string) bool {
	if s == "" || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

func validEnvName(s string) bool {
	if s == "" || len(s) > 128 || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func checkEnv(field string, names []string) ([]string, error) {
	if names == nil {
		return []string{}, nil
	}
	for i, n := range names {
		if !validEnvName(n) {
			return nil, &FieldError{fmt.Sprintf("%s[%d]", field, i), fmt.Sprintf("%q is not a variable name ([A-Za-z_][A-Za-z0-9_]*)", n)}
		}
		if contains(names[:i], n) {
			return nil, &FieldError{fmt.Sprintf("%s[%d]", field, i), fmt.Sprintf("%q twice", n)}
		}
	}
	sort.Strings(names) // a set: its canonical order
	return names, nil
}

// resolve returns the absolute, cleaned path of a command: an absolute path
// as written (it must exist and be a regular executable file), a bare name
// looked up in PATH now.
func resolve(field, path string) (string, error) {
	if path == "" {
		return "", &FieldError{field, "empty"}
	}
	if !filepath.IsAbs(path) {
		if strings.ContainsRune(path, '/') {
			return "", &FieldError{field, fmt.Sprintf("%q: a relative path; give an absolute path or a bare name", path)}
		}
		found, err := exec.LookPath(path)
		if err != nil {
			return "", &FieldError{field, fmt.Sprintf("%q: not found in PATH", path)}
		}
		if path, err = filepath.Abs(found); err != nil {
			return "", &FieldError{field, err.Error()}
		}
	}
	path = filepath.Clean(path)
	fi, err := os.Stat(path)
	if err != nil {
		return "", &FieldError{field, err.Error()}
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", &FieldError{field, fmt.Sprintf("%q is not an executable file", path)}
	}
	return path, nil
}

func (c *Command) check(field string) error {
	if !validName(c.Name) {
		return &FieldError{field + ".name", fmt.Sprintf("%q: want 1-64 bytes of [a-z0-9_.-] starting with a letter", c.Name)}
	}
	var err error
	if c.Path, err = resolve(field+".path", c.Path); err != nil {
		return err
	}
	if c.Env, err = checkEnv(field+".env", c.Env); err != nil {
		return err
	}
	if c.PassEnv, err = checkEnv(field+".pass_env", c.PassEnv); err != nil {
		return err
	}
	if c.TimeoutMillis, err = timeout(field+".timeout_ms", c.TimeoutMillis, DefaultExecTimeoutMillis); err != nil {
		return err
	}
	c.MaxOutputBytes, err = size(field+".max_output_bytes", c.MaxOutputBytes, DefaultExecMaxOutput, MaxSizeLimit)
	return err
}

func (x *Executor) check(field string) error {
	if !validName(x.Name) {
		return &FieldError{field + ".name", fmt.Sprintf("%q: want 1-64 bytes of [a-z0-9_.-] starting with a letter", x.Name)}
	}
	if x.Name == "http" || x.Name == "exec" {
		return &FieldError{field + ".name", fmt.Sprintf("%q is a built-in effect", x.Name)}
	}
	var err error
	if x.Path, err = resolve(field+".path", x.Path); err != nil {
		return err
	}
	if x.Args == nil {
		x.Args = []string{}
	}
	for i, a := range x.Args {
		if strings.IndexByte(a, 0) >= 0 {
			return &FieldError{fmt.Sprintf("%s.args[%d]", field, i), "holds NUL"}
		}
	}
	if x.PassEnv, err = checkEnv(field+".pass_env", x.PassEnv); err != nil {
		return err
	}
	if x.TimeoutMillis, err = timeout(field+".timeout_ms", x.TimeoutMillis, DefaultExtTimeoutMillis); err != nil {
		return err
	}
	if x.StartTimeoutMillis, err = timeout(field+".start_timeout_ms", x.StartTimeoutMillis, DefaultExtStartMillis); err != nil {
		return err
	}
	x.MaxFrameBytes, err = size(field+".max_frame_bytes", x.MaxFrameBytes, DefaultExtMaxFrame, MaxExtFrame)
	return err
}

func timeout(field string, v, def int64) (int64, error) {
	if v == 0 {
		return def, nil
	}
	if v < 1 || v > MaxTimeoutMillis {
		return 0, &FieldError{field, fmt.Sprintf("%d: want 1-%d milliseconds (0 or absent: %d)", v, MaxTimeoutMillis, def)}
	}
	return v, nil
}

func size(field string, v, def, max int64) (int64, error) {
	if v == 0 {
		return def, nil
	}
	if v < 1 || v > max {
		return 0, &FieldError{field, fmt.Sprintf("%d: want 1-%d bytes (0 or absent: %d)", v, max, def)}
	}
	return v, nil
}
