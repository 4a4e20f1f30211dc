package server

import (
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
)

// TestGetHeaderBytes pins the header lines of a GET of an artifact as
// they go on the wire (SPECS.md §18.4), names' case included: the handler
// assigns them under their canonical names without http.Header.Set.
func TestGetHeaderBytes(t *testing.T) {
	_, ts, st := newTestServer(t, Config{})
	ref, err := asl.PutArtifact(t.Context(), st, asl.HashSHA256, asl.Tagged(7, []byte("hello")))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", []string{
			"HTTP/1.1 200 OK", "Accept-Ranges: bytes", "Cache-Control: public, max-age=31536000, immutable", "Content-Length: 5",
			"Content-Type: application/octet-stream", `Etag: "` + ref.String() + `"`, "X-Amduat-Ref: " + ref.String(),
			"X-Amduat-Type-Tag: 0x00000007", "X-Content-Type-Options: nosniff",
		}},
		{"?format=artifact", []string{
			"HTTP/1.1 200 OK", "Cache-Control: public, max-age=31536000, immutable", "Content-Length: 18",
			"Content-Type: " + httpstore.ContentTypeArtifact, `Etag: "` + ref.String() + `"`, "X-Amduat-Ref: " + ref.String(),
			"X-Amduat-Type-Tag: 0x00000007", "X-Content-Type-Options: nosniff",
		}},
	} {
		conn, err := net.Dial("tcp", ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET /v1/artifacts/%s%s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", ref, tc.query)
		raw, err := io.ReadAll(conn)
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		head, _, _ := strings.Cut(string(raw), "\r\n\r\n")
		var got []string
		for _, line := range strings.Split(head, "\r\n") {
			if !strings.HasPrefix(line, "Date: ") && !strings.HasPrefix(line, "Connection: ") {
				got = append(got, line)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("GET%s: header lines\n%s\nwant\n%s", tc.query, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
}
