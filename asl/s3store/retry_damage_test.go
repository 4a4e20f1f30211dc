package s3store_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/s3store"
)

// damagedXLMeta is the cause MinIO gives for an object whose xl.meta fails
// its checksum (seen from MinIO with a byte of xl.meta flipped).
const damagedXLMeta = "We encountered an internal error, please try again.: cause(xlMetaV2.Load version(3), CRC mismatch, want 0xae07fa4d, got 0xd69f0bd)"

// s3Message is an S3 error answer with a message: the XML document, or
// for a HEAD MinIO's error headers.
func s3Message(status int, code, msg string) func(*http.Request) *http.Response {
	return func(req *http.Request) *http.Response {
		h := http.Header{}
		body := ""
		if req.Method == http.MethodHead {
			h.Set("x-minio-error-code", code)
			h.Set("x-minio-error-desc", `"`+msg+`"`)
		} else {
			h.Set("Content-Type", "application/xml")
			body = fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
				`<Error><Code>%s</Code><Message>%s</Message><Resource>%s</Resource><RequestId>0</RequestId></Error>`, code, msg, req.URL.Path)
		}
		return &http.Response{
			Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), StatusCode: status,
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: h, Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)),
			Request: req,
		}
	}
}

// TestDamageAnswers: an answer in which the object store says its copy of
// an object is damaged is ERR_INTEGRITY naming the object, and is not
// retried, neither by the store nor by the client library (which retries
// 500 and 503, InternalError and SlowDownRead, MaxRetries times, with
// pauses: seconds for an answer that stays the same; SPECS.md §6.7,
// "Retries"): an InternalError naming a CRC mismatch is sent once; a
// SlowDownRead is sent again only until unreadableFor is up. A
// SlowDownRead that passes is still retried and the read succeeds.
func TestDamageAnswers(t *testing.T) {
	// Not parallel: it shortens a bound every store reads.
	defer s3store.SetUnreadableFor(200 * time.Millisecond)()
	m := sharedServer(t)
	in := &injector{next: http.DefaultTransport.(*http.Transport).Clone()}
	o := options(m)
	o.Transport = in // MaxRetries: the client library's default (10)
	st := create(t, m, "damage-answers", o)
	ctx := t.Context()
	a := asl.Untagged(gen(77, 2000))
	ref, err := asl.PutArtifact(ctx, st, asl.HashSHA256, a)
	if err != nil {
		t.Fatal(err)
	}
	get := func() error { _, err := asl.Get(ctx, st, ref, 0); return err }
	stat := func() error { _, err := st.Stat(ctx, ref); return err }

	cases := []struct {
		name           string
		read           func() error
		match          func(*http.Request) bool
		n              int // answers armed
		status         int
		code, msg      string
		minSeen, maxSn int
		damaged        bool
	}{
		// One answer: sent once, whatever MaxRetries says.
		{"CRCMismatchOnGet", get, method(http.MethodGet), 1 << 30, http.StatusInternalServerError, "InternalError", damagedXLMeta, 1, 1, true},
		{"CRCMismatchOnHead", func() error {
			_, err := st.Client().StatObject(ctx, st.Bucket(), st.ArtifactKey(ref), minio.StatObjectOptions{})
			return err
		}, method(http.MethodHead), 1 << 30, http.StatusInternalServerError, "InternalError", damagedXLMeta, 1, 1, true},
		{"DecoderFailureOnStat", stat, method(http.MethodGet), 1 << 30, http.StatusInternalServerError, "InternalError", "We encountered an internal error, please try again.: cause(msgp: too few bytes left to read object)", 1, 1, true},
		// Retried for 200 ms (at most 6 answers: the pauses start at
		// 25 ms and double), then damage, with no retries of the
		// client library's after it.
		{"UnreadableOnGet", get, method(http.MethodGet), 1 << 30, http.StatusServiceUnavailable, "SlowDownRead", "Resource requested is unreadable, please reduce your request rate", 2, 6, true},
		// Shed twice, then served.
		{"UnreadableThenServed", get, method(http.MethodGet), 2, http.StatusServiceUnavailable, "SlowDownRead", "Resource requested is unreadable, please reduce your request rate", 2, 2, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in.arm(c.n, c.match, s3Message(c.status, c.code, c.msg))
			defer in.arm(0, every, nil)
			err := c.read()
			_, seen := in.left()
			if seen < c.minSeen || seen > c.maxSn {
				t.Errorf("%d answers seen, want %d to %d", seen, c.minSeen, c.maxSn)
			}
			if !c.damaged {
				if err != nil {
					t.Fatalf("read after %d transient answers = %v", c.n, err)
				}
				return
			}
			if c.match(&http.Request{Method: http.MethodHead}) {
				// The client library's own call: the answer it
				// returns, not the store's error.
				if err == nil || !strings.Contains(err.Error(), c.code) {
					t.Fatalf("StatObject = %v; want the answer naming %s", err, c.code)
				}
				return
			}
			if !errors.Is(err, asl.ErrIntegrity) || !strings.Contains(err.Error(), st.ArtifactKey(ref)) || !strings.Contains(err.Error(), c.code) {
				t.Fatalf("read = %v; want ERR_INTEGRITY naming %s and %s", err, st.ArtifactKey(ref), c.code)
			}
		})
	}
	// The object is intact: once the store answers, it reads.
	if got, err := asl.Get(ctx, st, ref, 0); err != nil || !bytes.Equal(got.Bytes, a.Bytes) {
		t.Fatalf("Get = %d bytes, %v", len(got.Bytes), err)
	}
}
