package server

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// A token file (SPECS.md §18.7) holds, per token, a name, the lowercase hex
// SHA-256 of the token's text and its scopes. The text itself is shown once,
// by AddToken, and never stored.
type tokenFile struct {
	Tokens []TokenEntry `json:"tokens"`
}

// TokenEntry is one token of a token file.
type TokenEntry struct {
	Name   string   `json:"name"`
	SHA256 string   `json:"sha256"`
	Scopes []string `json:"scopes"`
}

// Scopes a token may hold.
// The index of a name, plus 1, is its scope constant (server.go): plan and
// approve are separate from run, so a token that may run programs may not
// thereby call the world (SPECS.md §18.7).
var scopeNames = []string{"read", "write", "run", "admin", "plan", "approve"}

// scopeSet is a set of scopes.
type scopeSet uint8

func (s scopeSet) has(sc scope) bool { return s&(1<<sc) != 0 }

func (s scopeSet) names() []string {
	out := []string{}
	for i, n := range scopeNames {
		if s.has(scope(i + 1)) {
			out = append(out, n)
		}
	}
	return out
}

func parseScopes(names []string) (scopeSet, error) {
	var s scopeSet
	for _, n := range names {
		i := slices.Index(scopeNames, n)
		if i < 0 {
			return 0, fmt.Errorf("scope %q: want read, write, run, admin, plan or approve", n)
		}
		s |= 1 << scope(i+1)
	}
	return s, nil
}

// Auth checks bearer tokens against a token file, re-reading the file when
// it changes (checked at most once a second), so `amduat token add` and
// `revoke` take effect on a running server.
type Auth struct {
	path string

	mu      sync.Mutex
	checked time.Time
	stamp   string // size and modification time of the loaded file
	entries []authEntry
}

type authEntry struct {
	name   string
	sum    [32]byte
	scopes scopeSet
}

var errNoToken = errors.New("no bearer token (send Authorization: Bearer TOKEN; the client reads it from AMDUAT_TOKEN)")

// LoadAuth reads the token file at path.
func LoadAuth(path string) (*Auth, error) {
	a := &Auth{path: path}
	if err := a.reload(true); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *Auth) reload(force bool) error {
	fi, err := os.Stat(a.path)
	if err != nil {
		return fmt.Errorf("token file %s: %w", a.path, err)
	}
	stamp := fmt.Sprintf("%d/%d", fi.Size(), fi.ModTime().UnixNano())
	if !force && stamp == a.stamp {
		return nil
	}
	f, err := readTokenFile(a.path)
	if err != nil {
		return err
	}
	entries := make([]authEntry, 0, len(f.Tokens))
	for _, t := range f.Tokens {
		sum, err := hex.DecodeString(t.SHA256)
		if err != nil || len(sum) != 32 {
			return fmt.Errorf("token file %s: token %q: sha256 is not 64 hex digits", a.path, t.Name)
		}
		sc, err := parseScopes(t.Scopes)
		if err != nil {
			return fmt.Errorf("token file %s: token %q: %w", a.path, t.Name, err)
		}
		entries = append(entries, authEntry{name: t.Name, sum: [32]byte(sum), scopes: sc})
	}
	a.entries, a.stamp = entries, stamp
	return nil
}

// Check finds the token of an Authorization header value. Every entry is
// compared, in constant time, whatever matches, so timing tells nothing
// about which hash a guess came close to.
func (a *Auth) Check(header string) (name string, scopes scopeSet, err error) {
	tok, ok := strings.CutPrefix(header, "Bearer ")
	if header == "" || !ok || tok == "" {
		if header == "" {
			return "", 0, errNoToken
		}
		return "", 0, errors.New("Authorization header is not \"Bearer TOKEN\"")
	}
	sum := sha256.Sum256([]byte(tok))
	entries := a.current()
	found := -1
	for i := range entries {
		if subtle.ConstantTimeCompare(sum[:], entries[i].sum[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", 0, errors.New("token not recognised (revoked, mistyped, or for another server)")
	}
	return entries[found].name, entries[found].scopes, nil
}

// current returns the loaded entries, re-reading the file when it changed
// (checked at most once a second).
func (a *Auth) current() []authEntry {
	a.mu.Lock()
	defer a.mu.Unlock()
	if now := time.Now(); now.Sub(a.checked) >= time.Second {
		a.checked = now
		// A file that fails to load keeps the tokens loaded before.
		_ = a.reload(false)
	}
	return a.entries
}

// byName returns the entry of the token named name.
func (a *Auth) byName(name string) (authEntry, bool) {
	for _, e := range a.current() {
		if e.name == name {
			return e, true
		}
	}
	return authEntry{}, false
}

// checkToken finds the entry of a bare token (a sign-in form's).
func (a *Auth) checkToken(tok string) (authEntry, error) {
	name, _, err := a.Check("Bearer " + tok)
	if err != nil {
		return authEntry{}, err
	}
	e, ok := a.byName(name)
	if !ok {
		return authEntry{}, errors.New("token revoked meanwhile")
	}
	return e, nil
}

func readTokenFile(path string) (tokenFile, error) {
	var f tokenFile
	b, err := os.ReadFile(path)
	if err != nil {
		return f, fmt.Errorf("token file %s: %w", path, err)
	}
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err != nil {
		return f, fmt.Errorf("token file %s: %w", path, err)
	}
	if _, err := d.Token(); err != io.EOF {
		return f, fmt.Errorf("token file %s: data after the JSON object", path)
	}
	return f, nil
}

func writeTokenFile(path string, f tokenFile) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tokens-*")
	if err != nil {
		return fmt.Errorf("token file %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("token file %s: %w", path, err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("token file %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("token file %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("token file %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("token file %s: %w", path, err)
	}
	return nil
}

// ListTokens returns the entries of the token file at path. A missing file
// is an error wrapping os.ErrNotExist (a mistyped path must not read as a
// file without tokens).
func ListTokens(path string) ([]TokenEntry, error) {
	f, err := readTokenFile(path)
	if err != nil {
		return nil, err
	}
	if f.Tokens == nil {
		f.Tokens = []TokenEntry{}
	}
	return f.Tokens, err
}

// AddToken creates a token named name with scopes in the token file at path
// (creating the file, mode 0600) and returns its text: "amduat_" and 43
// characters of unpadded base64url of 32 random bytes. Names are unique.
func AddToken(path, name string, scopes []string) (string, error) {
	if name == "" || strings.ContainsAny(name, " \t\n") {
		return "", fmt.Errorf("token name %q: want a non-empty name without spaces", name)
	}
	if _, err := parseScopes(scopes); err != nil {
		return "", err
	}
	if len(scopes) == 0 {
		return "", errors.New("a token needs at least one scope: read, write, run, admin, plan or approve")
	}
	f, err := readTokenFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	for _, t := range f.Tokens {
		if t.Name == name {
			return "", fmt.Errorf("token file %s: a token named %q exists (revoke it first)", path, name)
		}
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	tok := "amduat_" + base64.RawURLEncoding.EncodeToString(raw[:])
	sum := sha256.Sum256([]byte(tok))
	f.Tokens = append(f.Tokens, TokenEntry{Name: name, SHA256: hex.EncodeToString(sum[:]), Scopes: slices.Clone(scopes)})
	return tok, writeTokenFile(path, f)
}

// RevokeToken removes the token named name from the token file at path.
func RevokeToken(path, name string) error {
	f, err := readTokenFile(path)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(f.Tokens, func(t TokenEntry) bool { return t.Name == name })
	if i < 0 {
		return fmt.Errorf("token file %s: no token named %q", path, name)
	}
	f.Tokens = slices.Delete(f.Tokens, i, i+1)
	return writeTokenFile(path, f)
}
