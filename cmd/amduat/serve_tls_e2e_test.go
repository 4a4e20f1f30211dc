package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeSelfSigned writes a certificate for 127.0.0.1 and its key.
func writeSelfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "amduat test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return certFile, keyFile
}

// TestServeTLSAndTokens serves HTTPS with a token file and uses it from the
// command line: the token's scopes decide what each command may do, and a
// revoked token stops working on the running server.
func TestServeTLSAndTokens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key := writeSelfSigned(t, dir)
	tokens := filepath.Join(dir, "tokens.json")
	c := newCLI(t)
	reader := strings.TrimSpace(c.must(0, "token", "add", "reader", "--scope", "read", "--auth-file", tokens).stdout)
	writer := strings.TrimSpace(c.must(0, "token", "add", "writer", "--scope", "read,write,run", "--auth-file", tokens).stdout)
	if !strings.HasPrefix(reader, "amduat_") || len(reader) != len("amduat_")+43 {
		t.Fatalf("token %q", reader)
	}
	// --scope defaults to read alone (SPECS.md §16.6).
	if out := c.must(0, "--json", "token", "add", "default-scope", "--auth-file", tokens).stdout; !strings.Contains(out, `"scopes":["read"]`) {
		t.Fatalf("token add without --scope: %s", out)
	}
	c.must(0, "token", "revoke", "default-scope", "--auth-file", tokens)
	list := c.must(0, "token", "list", "--auth-file", tokens).stdout
	if strings.Contains(list, reader) || !strings.Contains(list, "writer\tread,write,run\tsha256:") {
		t.Fatalf("token list %q", list)
	}
	oneErrorLine(t, c.must(exitIO, "token", "list", "--auth-file", tokens+".typo"), "token list")
	url := startServe(t, filepath.Join(dir, "served"), "--auth-file", tokens, "--tls-cert", cert, "--tls-key", key)
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("serve with TLS prints %s", url)
	}
	c.store = url
	// The client trusts the self-signed certificate through SSL_CERT_FILE,
	// as Go's TLS does on Linux; the token comes from AMDUAT_TOKEN.
	run := func(tok string, stdin string, args ...string) result {
		t.Helper()
		c.env = []string{"SSL_CERT_FILE=" + cert, "AMDUAT_TOKEN=" + tok}
		return c.runIn(strings.NewReader(stdin), args...)
	}
	r := run(writer, "over tls", "put")
	if r.code != 0 {
		t.Fatalf("put with the writer token: exit %d: %s", r.code, r.stderr)
	}
	ref := strings.TrimSpace(r.stdout)
	if r := run(reader, "", "get", ref); r.code != 0 || r.stdout != "over tls" {
		t.Fatalf("get with the reader token: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := run(reader, "more", "put"); r.code != exitIO || !strings.Contains(r.stderr, "403") || !strings.Contains(r.stderr, "AMDUAT_TOKEN") {
		t.Fatalf("put with the reader token: exit %d: %s", r.code, r.stderr)
	}
	// A put of what the server holds already needs no write scope: the
	// client asks missing (read) and has nothing to send (SPECS.md §18.9).
	if r := run(reader, "over tls", "put"); r.code != 0 || strings.TrimSpace(r.stdout) != ref {
		t.Fatalf("put of a stored artifact with the reader token: exit %d %q: %s", r.code, r.stdout, r.stderr)
	}
	// A refused token is exit 6 (SPECS.md §16.2), 401 as 403.
	if r := run("amduat_wrong", "", "get", ref); r.code != exitIO || !strings.Contains(r.stderr, "401") {
		t.Fatalf("get with a wrong token: exit %d: %s", r.code, r.stderr)
	}
	c.must(0, "token", "revoke", "reader", "--auth-file", tokens)
	deadline := time.Now().Add(time.Minute) // a bound for a server that never re-reads the file
	for {
		r := run(reader, "", "get", ref)
		if r.code != 0 && strings.Contains(r.stderr, "401") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a revoked token still works after a minute: exit %d %s", r.code, r.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Without a token file, only loopback: another address is refused.
	other := newCLI(t)
	other.initStore()
	r = other.run("serve", "--listen", "0.0.0.0:0")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--auth-file") {
		t.Fatalf("serve on 0.0.0.0 without --auth-file: exit %d: %s", r.code, r.stderr)
	}
}

// TestServeUnixSocket serves on a unix socket: requests over it work, and
// the socket is removed at shutdown.
func TestServeUnixSocket(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sock := filepath.Join(dir, "amduat.sock")
	url := startServe(t, filepath.Join(dir, "served"), "--unix", sock)
	if url != "unix://"+sock {
		t.Fatalf("serve --unix prints %s", url)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	resp, err := hc.Post("http://amduat/v1/artifacts", "application/octet-stream", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "00011f1d4ea728bc4c10bbc8211c7644aa950b6296c9b3e70d263e4ae6fc83e895e4") {
		t.Fatalf("put over the socket: %d %s", resp.StatusCode, body)
	}
}
