package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnixSocketStoreURL: the URL serve --unix prints is one --store
// accepts, and commands work through it (SPECS.md §18.9).
func TestUnixSocketStoreURL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sock := filepath.Join(dir, "amduat.sock")
	url := startServe(t, filepath.Join(dir, "served"), "--unix", sock)
	if url != "unix://"+sock {
		t.Fatalf("serve --unix %s printed %q, want unix://%s", sock, url, sock)
	}
	c := newCLI(t)
	c.store = url
	ref := strings.TrimSpace(c.runIn(strings.NewReader("over a socket"), "put").stdout)
	if got := c.must(0, "get", ref).stdout; got != "over a socket" {
		t.Fatalf("get through %s: %q", url, got)
	}
	c.store = "unix://relative.sock"
	oneErrorLine(t, c.must(exitUsage, "has", ref), "has")
}

// TestCACertTrustsSelfSigned: --ca-cert and AMDUAT_CA_CERT trust a
// self-signed server certificate; without them the client refuses it.
func TestCACertTrustsSelfSigned(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key := writeSelfSigned(t, dir)
	url := startServe(t, filepath.Join(dir, "served"), "--tls-cert", cert, "--tls-key", key)
	c := newCLI(t)
	c.store = url
	c.env = []string{"SSL_CERT_FILE=" + filepath.Join(dir, "none.pem"), "AMDUAT_CA_CERT="} // no system roots trust it
	if r := c.runIn(strings.NewReader("x"), "put"); r.code != exitIO || !strings.Contains(r.stderr, "certificate") {
		t.Fatalf("put without --ca-cert: exit %d %q, want 6 naming the certificate", r.code, r.stderr)
	}
	r := c.runIn(strings.NewReader("trusted"), "--ca-cert", cert, "put")
	if r.code != 0 {
		t.Fatalf("put --ca-cert: exit %d %s", r.code, r.stderr)
	}
	ref := strings.TrimSpace(r.stdout)
	c.env = append(c.env, "AMDUAT_CA_CERT="+cert)
	if got := c.must(0, "get", ref).stdout; got != "trusted" {
		t.Fatalf("get with AMDUAT_CA_CERT: %q", got)
	}
	notPEM := filepath.Join(dir, "not.pem")
	os.WriteFile(notPEM, []byte("hello"), 0o644)
	oneErrorLine(t, c.must(exitUsage, "--ca-cert", notPEM, "has", ref), "has")
}
