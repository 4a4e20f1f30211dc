package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"strconv"

	"github.com/amduat/amduat/asl/httpstore"
)

// JSONErrors wraps ln so that the responses net/http writes by itself,
// before any handler runs, to requests it cannot parse (two different
// Content-Length values, a malformed header line, a missing Host, headers
// too large, an unknown transfer coding) carry the {error, code} JSON body
// of every other error (SPECS.md §18.2) instead of Go's plain text. Only
// those responses are changed: net/http writes each as one write of the
// form "HTTP/1.1 <status>" + "\r\nContent-Type: text/plain;
// charset=utf-8\r\nConnection: close\r\n\r\n" + text, a form no response
// of a handler has (those always carry a Date header). Wrap the listener
// that http.Server.Serve reads from (after TLS, if any).
func JSONErrors(ln net.Listener) net.Listener { return jsonErrListener{ln} }

type jsonErrListener struct{ net.Listener }

func (l jsonErrListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &jsonErrConn{Conn: c}, nil
}

type jsonErrConn struct{ net.Conn }

// goErrorHeaders is what net/http writes between the status line and the
// text of its own error responses (net/http, conn.serve).
const goErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

func (c *jsonErrConn) Write(p []byte) (int, error) {
	if b, ok := rewriteGoError(p); ok {
		if _, err := c.Conn.Write(b); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// rewriteGoError turns one of net/http's own error responses into the
// same status with the JSON error body, or reports false.
func rewriteGoError(p []byte) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(p, []byte("HTTP/1.1 "))
	if !ok {
		return nil, false
	}
	statusLine, text, ok := bytes.Cut(rest, []byte(goErrorHeaders))
	if !ok || bytes.ContainsAny(statusLine, "\r\n") || len(statusLine) < 4 {
		return nil, false
	}
	status, err := strconv.Atoi(string(statusLine[:3]))
	if err != nil || status < 400 || status > 599 {
		return nil, false
	}
	code := httpstore.CodeBadRequest
	switch status {
	case 431:
		code = httpstore.CodeTooLarge
	case 501:
		code = httpstore.CodeUnsupported
	}
	msg := string(text)
	if _, after, ok := bytes.Cut(text, []byte(": ")); ok {
		msg = string(after) // "400 Bad Request: <why>" -> "<why>"
	}
	body, _ := json.Marshal(httpstore.ErrorBody{Error: oneLine("http: " + msg), Code: code})
	body = append(body, '\n')
	var out bytes.Buffer
	fmt.Fprintf(&out, "HTTP/1.1 %s\r\nContent-Type: %s\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\nContent-Length: %d\r\n\r\n", statusLine, httpstore.ContentTypeJSON, len(body))
	out.Write(body)
	return out.Bytes(), true
}
