package s3store_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/s3store"
)

// injector answers the next n requests that match with a canned answer
// instead of sending them to MinIO, then lets requests through.
type injector struct {
	next http.RoundTripper

	mu     sync.Mutex
	n      int
	match  func(*http.Request) bool
	answer func(*http.Request) *http.Response
	seen   int // requests answered by the injector
}

func (in *injector) arm(n int, match func(*http.Request) bool, answer func(*http.Request) *http.Response) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.n, in.match, in.answer, in.seen = n, match, answer, 0
}

func (in *injector) left() (left, seen int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.n, in.seen
}

func (in *injector) RoundTrip(req *http.Request) (*http.Response, error) {
	in.mu.Lock()
	if in.n > 0 && in.match(req) {
		in.n--
		in.seen++
		answer := in.answer
		in.mu.Unlock()
		if req.Body != nil {
			io.Copy(io.Discard, req.Body)
			req.Body.Close()
		}
		return answer(req), nil
	}
	in.mu.Unlock()
	return in.next.RoundTrip(req)
}

// s3Answer is an S3 error answer: the XML document, or for a HEAD only
// MinIO's error header.
func s3Answer(status int, code string) func(*http.Request) *http.Response {
	return func(req *http.Request) *http.Response {
		h := http.Header{}
		body := ""
		if req.Method == http.MethodHead {
			h.Set("x-minio-error-code", code)
		} else {
			h.Set("Content-Type", "application/xml")
			body = fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
				`<Error><Code>%s</Code><Message>injected</Message><Resource>%s</Resource><RequestId>0</RequestId></Error>`, code, req.URL.Path)
		}
		return &http.Response{
			Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), StatusCode: status,
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: h, Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)),
			Request: req,
		}
	}
}

func every(*http.Request) bool { return true }
func method(m string) func(*http.Request) bool {
	return func(r *http.Request) bool { return r.Method == m }
}

// TestTransientAnswers: the transient answers of SPECS.md §6.7, "Retries"
// (a MinIO still starting, SlowDown, InternalError, RequestTimeout…) are
// sent again until the server serves, even with MaxRetries 1 (which a test
// sets to fail fast when it stops MinIO on purpose); a PUT's body is sent
// again intact; other error answers are not retried; a server that stays
// unavailable fails with an I/O error naming the object once the bound is
// up.
func TestTransientAnswers(t *testing.T) {
	// Not parallel: the Bound case shortens a bound every store reads.
	m := sharedServer(t)
	in := &injector{next: http.DefaultTransport.(*http.Transport).Clone()}
	o := options(m)
	o.MaxRetries = 1
	o.Transport = in
	ctx := t.Context()

	// Create against a server that is "still starting": the bucket check
	// (a HEAD: the code is in a header), the bucket creation and the
	// config object all meet XMinioServerNotInitialized first.
	in.arm(6, every, s3Answer(http.StatusServiceUnavailable, "XMinioServerNotInitialized"))
	st := create(t, m, "transient", o)
	if left, seen := in.left(); left != 0 || seen != 6 {
		t.Fatalf("Create: %d injected answers left, %d seen; want 0, 6", left, seen)
	}

	cases := []struct {
		name   string
		status int
		code   string
		match  func(*http.Request) bool
	}{
		{"NotInitializedOnPut", http.StatusServiceUnavailable, "XMinioServerNotInitialized", method(http.MethodPut)},
		{"SlowDownOnPut", http.StatusServiceUnavailable, "SlowDown", method(http.MethodPut)},
		{"SlowDownWriteOnPut", http.StatusServiceUnavailable, "SlowDownWrite", method(http.MethodPut)},
		{"ServiceUnavailableOnGet", http.StatusServiceUnavailable, "ServiceUnavailable", method(http.MethodGet)},
		{"InternalErrorOnGet", http.StatusInternalServerError, "InternalError", method(http.MethodGet)},
		{"RequestTimeoutS3", http.StatusBadRequest, "RequestTimeout", every},
		{"RequestTimeoutMinIO", http.StatusServiceUnavailable, "RequestTimeout", every},
		{"TooManyRequests", http.StatusTooManyRequests, "TooManyRequests", every},
		{"ServerBusy", http.StatusServiceUnavailable, "ServerBusy", every},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := asl.Tagged(asl.TypeTag(i), gen(uint64(500+i), 1000+i))
			in.arm(4, c.match, s3Answer(c.status, c.code))
			ref, err := asl.PutArtifact(ctx, st, asl.HashSHA256, a)
			if err != nil {
				t.Fatalf("Put: %v", err)
			}
			if _, err := st.Stat(ctx, ref); err != nil {
				t.Fatalf("Stat: %v", err)
			}
			got, err := asl.Get(ctx, st, ref, 0)
			if err != nil || !bytes.Equal(got.Bytes, a.Bytes) || got.Header() != a.Header() {
				t.Fatalf("Get = %d bytes, %v", len(got.Bytes), err)
			}
			if left, _ := in.left(); left != 0 {
				t.Fatalf("%d injected answers never met", left)
			}
		})
	}

	// A HEAD's answer has no body; with no code header either, the 503
	// status decides.
	t.Run("HeadNoCode", func(t *testing.T) {
		in.arm(4, method(http.MethodHead), s3Answer(http.StatusServiceUnavailable, ""))
		if ok, err := st.Client().BucketExists(ctx, st.Bucket()); !ok || err != nil {
			t.Fatalf("BucketExists = %v, %v", ok, err)
		}
		if left, seen := in.left(); left != 0 || seen != 4 {
			t.Fatalf("%d injected answers left, %d seen; want 0, 4", left, seen)
		}
	})

	// Not transient: one answer and the operation fails (MaxRetries 1).
	for _, c := range []struct {
		name   string
		status int
		code   string
	}{
		{"AccessDenied", http.StatusForbidden, "AccessDenied"},
		{"InternalErrorOtherCode", http.StatusInternalServerError, "XMinioStorageFull"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := asl.Untagged([]byte("not transient " + c.name))
			in.arm(1, method(http.MethodPut), s3Answer(c.status, c.code))
			_, err := asl.PutArtifact(ctx, st, asl.HashSHA256, a)
			if err == nil || asl.IsContentError(err) || !strings.Contains(err.Error(), "s3://"+st.Bucket()+"/") {
				t.Fatalf("Put answered %d %s = %v; want an I/O error naming the object", c.status, c.code, err)
			}
			if _, seen := in.left(); seen != 1 {
				t.Fatalf("the answer was retried: %d answers seen", seen)
			}
		})
	}

	// A server that stays unavailable: the last answer, once the bound is
	// up, is an I/O error naming the object.
	t.Run("Bound", func(t *testing.T) {
		defer s3store.SetTransientFor(300 * time.Millisecond)()
		ref := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("never served")))
		in.arm(1<<30, every, s3Answer(http.StatusServiceUnavailable, "XMinioServerNotInitialized"))
		defer in.arm(0, every, nil)
		_, err := st.Stat(ctx, ref)
		if err == nil || errors.Is(err, asl.ErrNotFound) || asl.IsContentError(err) ||
			!strings.Contains(err.Error(), st.ArtifactKey(ref)) || !strings.Contains(err.Error(), "not initialized") && !strings.Contains(err.Error(), "injected") {
			t.Fatalf("Stat against a server that stays unavailable = %v; want an I/O error naming the object", err)
		}
		if _, seen := in.left(); seen < 2 {
			t.Fatalf("%d answers seen; want the request sent again", seen)
		}
	})
}

// TestReachWait: with the object store refusing connections (stopped), a
// put waits for it (Options.ReachWait), says once what it waits for
// (WaitLog), and succeeds when it is back; with no wait it fails at once
// with an I/O error (SPECS.md §6.7, "Retries").
func TestReachWait(t *testing.T) {
	// Not parallel: it stops the package's MinIO (stoppableServer).
	m := stoppableServer(t)
	log := &syncBuffer{}
	o := options(m)
	o.ReachWait = 5 * time.Minute // a bound against a hang; the restart below ends the wait
	o.WaitLog = log
	st := create(t, m, "reachwait", o)
	o.ReachWait = -1
	o.WaitLog = nil
	nowait, err := s3store.Open(t.Context(), st.Bucket(), st.Prefix(), o)
	if err != nil {
		t.Fatal(err)
	}
	m.Stop()
	a := asl.Untagged([]byte("put while the object store restarts"))
	if _, err := asl.PutArtifact(t.Context(), nowait, asl.HashSHA256, a); err == nil || asl.IsContentError(err) {
		t.Fatalf("put with no wait, MinIO down = %v, want an I/O error", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := asl.PutArtifact(t.Context(), st, asl.HashSHA256, a)
		done <- err
	}()
	for !strings.Contains(log.String(), "refuses connections") {
		select {
		case err := <-done:
			t.Fatalf("put returned %v before it said it waits", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	m.Restart()
	if err := <-done; err != nil {
		t.Fatalf("put across the restart: %v", err)
	}
	if n := strings.Count(log.String(), "\n"); n != 1 || !strings.Contains(log.String(), "--s3-wait") {
		t.Errorf("wait log = %q, want one line naming --s3-wait", log.String())
	}
	if _, err := asl.Get(t.Context(), st, asl.MustDerive(asl.HashSHA256, a), 0); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
