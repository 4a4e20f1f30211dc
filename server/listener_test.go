package server

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl/httpstore"
)

// TestJSONErrorsGoOwn: the responses net/http writes by itself to requests
// it cannot parse carry the {error, code} JSON body (issue 20), and the
// server's own responses pass unchanged.
func TestJSONErrorsGoOwn(t *testing.T) {
	t.Parallel()
	s, _, _ := newTestServer(t, Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: s.Handler(), MaxHeaderBytes: 4 << 10}
	go hs.Serve(JSONErrors(ln))
	t.Cleanup(func() { hs.Close() })
	tests := []struct {
		name, req string
		status    int
		code      string
	}{
		{"two Content-Length values", "PUT /v1/artifacts HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400, httpstore.CodeBadRequest},
		{"malformed header line", "GET /v1/health HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n", 400, httpstore.CodeBadRequest},
		{"missing Host", "GET /v1/health HTTP/1.1\r\n\r\n", 400, httpstore.CodeBadRequest},
		{"unknown transfer coding", "PUT /v1/artifacts HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501, httpstore.CodeUnsupported},
		{"headers too large", "GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 16<<10) + "\r\n\r\n", 431, httpstore.CodeTooLarge},
		{"malformed reference", "GET /v1/artifacts/zz HTTP/1.1\r\nHost: x\r\n\r\n", 400, httpstore.CodeBadReference},
		{"bad hex digit", "GET /v1/artifacts/00X1 HTTP/1.1\r\nHost: x\r\n\r\n", 400, httpstore.CodeBadReference},
		{"reserved hash id", "GET /v1/artifacts/0000aa HTTP/1.1\r\nHost: x\r\n\r\n", 400, httpstore.CodeBadReference},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			go io.WriteString(c, tt.req)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			var eb httpstore.ErrorBody
			if resp.StatusCode != tt.status || resp.Header.Get("Content-Type") != httpstore.ContentTypeJSON || json.Unmarshal(body, &eb) != nil || eb.Code != tt.code || eb.Error == "" {
				t.Fatalf("status %d, %q, body %q; want %d with code %s", resp.StatusCode, resp.Header.Get("Content-Type"), body, tt.status, tt.code)
			}
			// A malformed reference is not damage: its message says what
			// is wrong, without "ERR_INTEGRITY".
			if strings.Contains(eb.Error, "ERR_INTEGRITY") {
				t.Fatalf("message %q names ERR_INTEGRITY", eb.Error)
			}
		})
	}
}
