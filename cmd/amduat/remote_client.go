package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/amduat/amduat/asl/httpstore"
)

// A remote store is named by an http(s) URL, or by unix:///PATH for a
// server listening on a unix socket (`amduat serve --unix PATH` prints that
// URL). A server whose certificate no system root signs (a self-signed one)
// is trusted with --ca-cert FILE or AMDUAT_CA_CERT (SPECS.md §18.9).

// unixScheme prefixes a --store value naming a unix socket.
const unixScheme = "unix://"

// isUnixStore reports whether a --store value names a server's unix socket.
func isUnixStore(store string) bool { return strings.HasPrefix(store, unixScheme) }

// unixSocketPath returns the socket path of a unix:///PATH store value.
func unixSocketPath(store string) (string, error) {
	p := strings.TrimPrefix(store, unixScheme)
	if !strings.HasPrefix(p, "/") || len(p) < 2 {
		return "", fmt.Errorf("store %s: want unix:///ABSOLUTE/PATH of a socket", store)
	}
	return p, nil
}

// unixStoreURL is the URL serve prints for a socket at path.
func unixStoreURL(path string) string { return unixScheme + path }

// remoteHTTPClient returns the HTTP client for store: nil (the client's
// own) when nothing calls for another, else one dialling the unix socket
// and trusting caFile's certificates besides the system's.
func remoteHTTPClient(store, caFile string) (*http.Client, string, error) {
	if !isUnixStore(store) && caFile == "" {
		return nil, store, nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 16
	base := store
	if isUnixStore(store) {
		path, err := unixSocketPath(store)
		if err != nil {
			return nil, "", usageErr(err)
		}
		var d net.Dialer
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", path)
		}
		base = "http://unix"
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, "", fail(exitIO, caFile, unwrapPathError(err))
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, "", fail(exitUsage, caFile, errors.New("holds no PEM certificate (--ca-cert wants the server's certificate or its CA's, PEM-encoded)"))
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr}, base, nil
}

// openRemote connects to the server a --store value names.
func (a *app) openRemote(store string) (*httpstore.Client, error) {
	hc, base, err := remoteHTTPClient(store, a.caCert)
	if err != nil {
		return nil, err
	}
	c, err := httpstore.Open(a.context(), base, httpstore.Options{Token: os.Getenv("AMDUAT_TOKEN"), HTTPClient: hc})
	if err != nil {
		if hc != nil {
			hc.CloseIdleConnections()
		}
		return nil, failAuto(store, err)
	}
	return c, nil
}
