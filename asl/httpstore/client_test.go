package httpstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/internal/longtest"
	"github.com/amduat/amduat/server"
)

// fixture is the real server over a memstore, behind a hook that may
// answer a request itself: a server that lies, fails or counts. The
// client's distrust is tested against it; the store is never mocked.
type fixture struct {
	t    *testing.T
	st   *memstore.Store
	real http.Handler
	ts   *httptest.Server
	c    *httpstore.Client

	mu   sync.Mutex
	hook func(w http.ResponseWriter, r *http.Request) bool // true: answered
	hits map[string]int                                    // "METHOD /path" -> requests
}

func newFixture(t *testing.T, opts httpstore.Options) *fixture {
	t.Helper()
	f := &fixture{t: t, st: memstore.New(), hits: map[string]int{}}
	s, err := server.New(server.Config{Store: mem{f.st}})
	if err != nil {
		t.Fatal(err)
	}
	f.real = s.Handler()
	f.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.hits[r.Method+" "+r.URL.Path]++
		hook := f.hook
		f.mu.Unlock()
		if hook != nil && r.URL.Path != httpstore.PathMeta && hook(w, r) {
			return
		}
		f.real.ServeHTTP(w, r)
	}))
	t.Cleanup(f.ts.Close)
	if opts.RetryBase == 0 {
		opts.RetryBase = time.Millisecond
	}
	f.c, err = httpstore.Open(t.Context(), f.ts.URL, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.c.Close() })
	return f
}

func (f *fixture) setHook(h func(w http.ResponseWriter, r *http.Request) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hook = h
	f.hits = map[string]int{}
}

func (f *fixture) count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits[key]
}

// record runs the real server on r.
func (f *fixture) record(r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	f.real.ServeHTTP(rec, r)
	return rec
}

// replay writes rec to w with body, after edit changed its header.
func replay(w http.ResponseWriter, rec *httptest.ResponseRecorder, body []byte, edit func(h http.Header)) {
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	if edit != nil {
		edit(w.Header())
	}
	w.WriteHeader(rec.Code)
	w.Write(body)
}

// isArtifactGet reports whether r is GET /v1/artifacts/REF of raw bytes.
func isArtifactGet(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, httpstore.PathArtifact) &&
		r.URL.Path != httpstore.PathBatch && r.URL.Path != httpstore.PathMissing && r.URL.Query().Get("format") == ""
}

// TestFetchDistrust: whatever a server says about an artifact, Fetch
// returns its bytes only when they hash to the reference; otherwise
// ErrIntegrity, from Fetch or from the final Read, never wrong bytes.
func TestFetchDistrust(t *testing.T) {
	t.Parallel()
	other := asl.Tagged(1, bytes.Repeat([]byte("other artifact "), 40))
	cases := []struct {
		name string
		lie  func(w http.ResponseWriter, rec *httptest.ResponseRecorder, f *fixture)
	}{
		{"flipped byte", func(w http.ResponseWriter, rec *httptest.ResponseRecorder, _ *fixture) {
			b := rec.Body.Bytes()
			b[len(b)/2] ^= 0x80
			replay(w, rec, b, nil)
		}},
		{"wrong type tag", func(w http.ResponseWriter, rec *httptest.ResponseRecorder, _ *fixture) {
			replay(w, rec, rec.Body.Bytes(), func(h http.Header) { h.Set(httpstore.HeaderTypeTag, "0x00000002") })
		}},
		{"tag dropped", func(w http.ResponseWriter, rec *httptest.ResponseRecorder, _ *fixture) {
			replay(w, rec, rec.Body.Bytes(), func(h http.Header) { h.Del(httpstore.HeaderTypeTag) })
		}},
		{"prefix with its length", func(w http.ResponseWriter, rec *httptest.ResponseRecorder, _ *fixture) {
			b := rec.Body.Bytes()
			replay(w, rec, b[:len(b)-1], nil)
		}},
		{"extra byte with its length", func(w http.ResponseWriter, rec *httptest.ResponseRecorder, _ *fixture) {
			replay(w, rec, append(rec.Body.Bytes(), 0), nil)
		}},
		{"another artifact", func(w http.ResponseWriter, rec *httptest.ResponseRecorder, f *fixture) {
			replay(w, rec, other.Bytes, func(h http.Header) { h.Set(httpstore.HeaderTypeTag, "0x00000001") })
		}},
		{"another artifact, named", func(w http.ResponseWriter, rec *httptest.ResponseRecorder, f *fixture) {
			replay(w, rec, rec.Body.Bytes(), func(h http.Header) {
				h.Set(httpstore.HeaderRef, asl.MustDerive(asl.HashSHA256, other).String())
			})
		}},
		{"truncated", func(w http.ResponseWriter, rec *httptest.ResponseRecorder, _ *fixture) {
			b := rec.Body.Bytes()
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(b[:len(b)/2])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}},
		{"no length", func(w http.ResponseWriter, rec *httptest.ResponseRecorder, _ *fixture) {
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.Header().Del("Content-Length")
			w.WriteHeader(rec.Code)
			w.(http.Flusher).Flush()
			w.Write(rec.Body.Bytes())
		}},
	}
	// A streamed body is read through Read (io.ReadAll) or through the
	// reader's WriteTo (io.Copy): both must refuse the same lies.
	reads := map[string]func(io.Reader) ([]byte, error){
		"Read": io.ReadAll,
		"WriteTo": func(r io.Reader) ([]byte, error) {
			var b bytes.Buffer
			_, err := io.Copy(&b, r)
			return b.Bytes(), err
		},
	}
	for _, size := range []int{1000, 600 << 10} {
		for _, c := range cases {
			for how, read := range reads {
				t.Run(fmt.Sprintf("%s/%d/%s", c.name, size, how), func(t *testing.T) {
					f := newFixture(t, httpstore.Options{})
					a := asl.Tagged(7, bytes.Repeat([]byte{'a', 'b', 'c'}, size/3))
					ref := asl.MustDerive(asl.HashSHA256, a)
					if _, err := f.st.PutBatch(t.Context(), asl.HashSHA256, []asl.Artifact{a}); err != nil {
						t.Fatal(err)
					}
					f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
						if !isArtifactGet(r) {
							return false
						}
						c.lie(w, f.record(r), f)
						return true
					})
					rc, hdr, err := f.c.Fetch(t.Context(), ref)
					var got []byte
					if err == nil {
						got, err = read(rc)
						rc.Close()
					}
					if c.name == "no length" {
						if !errors.Is(err, httpstore.ErrProtocol) {
							t.Fatalf("Fetch = %v, want ErrProtocol", err)
						}
						return
					}
					if !errors.Is(err, asl.ErrIntegrity) {
						t.Fatalf("Fetch from a lying server = header %+v, %d bytes, %v; want ErrIntegrity", hdr, len(got), err)
					}
					if c.name == "truncated" && !errors.Is(err, io.ErrUnexpectedEOF) {
						t.Errorf("truncated body: %v does not wrap io.ErrUnexpectedEOF", err)
					}
					if len(got) >= len(a.Bytes) {
						t.Errorf("Fetch returned %d bytes with its error, the whole artifact's worth", len(got))
					}
					if !strings.Contains(err.Error(), ref.String()) || !strings.Contains(err.Error(), f.ts.URL) {
						t.Errorf("error %q names neither the reference nor the URL", err)
					}
					if _, err := asl.Get(t.Context(), f.c, ref, 0); !errors.Is(err, asl.ErrIntegrity) {
						t.Errorf("Get = %v, want ErrIntegrity", err)
					}
				})
			}
		}
	}
}

// TestAnswerDistrust: references the server acknowledges or reports must
// be the ones the client computed or asked for.
func TestAnswerDistrust(t *testing.T) {
	t.Parallel()
	a := asl.Untagged([]byte("the artifact"))
	b := asl.Untagged([]byte("another one"))
	refA, refB := asl.MustDerive(asl.HashSHA256, a), asl.MustDerive(asl.HashSHA256, b)
	jsonLie := func(method, path string, edit func(v map[string]any)) func(f *fixture) func(w http.ResponseWriter, r *http.Request) bool {
		return func(f *fixture) func(w http.ResponseWriter, r *http.Request) bool {
			return func(w http.ResponseWriter, r *http.Request) bool {
				if r.Method != method || r.URL.Path != path {
					return false
				}
				rec := f.record(r)
				var v map[string]any
				if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
					panic(err)
				}
				edit(v)
				out, _ := json.Marshal(v)
				replay(w, rec, out, nil)
				return true
			}
		}
	}
	cases := []struct {
		name string
		hook func(f *fixture) func(w http.ResponseWriter, r *http.Request) bool
		call func(ctx context.Context, c *httpstore.Client) error
		want error
	}{
		{"put acknowledges another ref",
			jsonLie("POST", httpstore.PathArtifacts, func(v map[string]any) { v["ref"] = refB.String() }),
			func(ctx context.Context, c *httpstore.Client) error {
				_, err := asl.PutArtifact(ctx, c, asl.HashSHA256, a)
				return err
			}, asl.ErrIntegrity},
		{"streamed put acknowledges another ref",
			jsonLie("POST", httpstore.PathArtifacts, func(v map[string]any) { v["ref"] = refB.String() }),
			func(ctx context.Context, c *httpstore.Client) error {
				_, err := c.Put(ctx, asl.HashSHA256, a.Header(), io.MultiReader(bytes.NewReader(a.Bytes)))
				return err
			}, asl.ErrIntegrity},
		{"put acknowledges another size",
			jsonLie("POST", httpstore.PathArtifacts, func(v map[string]any) { v["size"] = 99 }),
			func(ctx context.Context, c *httpstore.Client) error {
				_, err := asl.PutArtifact(ctx, c, asl.HashSHA256, a)
				return err
			}, asl.ErrIntegrity},
		{"batch acknowledges refs out of order",
			jsonLie("POST", httpstore.PathBatch, func(v map[string]any) {
				refs := v["refs"].([]any)
				refs[0], refs[1] = refs[1], refs[0]
			}),
			func(ctx context.Context, c *httpstore.Client) error {
				_, err := c.PutBatch(ctx, asl.HashSHA256, []asl.Artifact{a, b})
				return err
			}, asl.ErrIntegrity},
		{"batch acknowledges too few",
			jsonLie("POST", httpstore.PathBatch, func(v map[string]any) { v["refs"] = v["refs"].([]any)[:1] }),
			func(ctx context.Context, c *httpstore.Client) error {
				_, err := c.PutBatch(ctx, asl.HashSHA256, []asl.Artifact{a, b})
				return err
			}, httpstore.ErrProtocol},
		{"missing names what was not asked",
			jsonLie("POST", httpstore.PathMissing, func(v map[string]any) { v["missing"] = []string{refB.String()} }),
			func(ctx context.Context, c *httpstore.Client) error {
				_, err := c.Missing(ctx, []asl.Reference{refA})
				return err
			}, httpstore.ErrProtocol},
		{"stat names another ref",
			jsonLie("GET", httpstore.PathArtifact+refA.String(), func(v map[string]any) { v["ref"] = refB.String() }),
			func(ctx context.Context, c *httpstore.Client) error {
				if _, err := asl.PutArtifact(ctx, c, asl.HashSHA256, a); err != nil {
					return err
				}
				_, err := c.Stat(ctx, refA)
				return err
			}, asl.ErrIntegrity},
		{"list out of order",
			jsonLie("GET", httpstore.PathArtifacts, func(v map[string]any) {
				arts := v["artifacts"].([]any)
				arts[0], arts[1] = arts[1], arts[0]
			}),
			func(ctx context.Context, c *httpstore.Client) error {
				if _, err := c.PutBatch(ctx, asl.HashSHA256, []asl.Artifact{a, b}); err != nil {
					return err
				}
				return c.Enumerate(ctx, asl.Reference{}, func(asl.Info) error { return nil })
			}, httpstore.ErrProtocol},
		{"scan key without the prefix",
			jsonLie("GET", httpstore.PathIndex+"space", func(v map[string]any) {
				v["entries"] = []map[string]string{{"key": "ff", "value": ""}}
			}),
			func(ctx context.Context, c *httpstore.Client) error {
				return c.ScanIndex(ctx, "space", []byte{1}, func(k, v []byte) error { return nil })
			}, httpstore.ErrProtocol},
		{"not JSON",
			func(f *fixture) func(w http.ResponseWriter, r *http.Request) bool {
				return func(w http.ResponseWriter, r *http.Request) bool {
					w.Header().Set("Content-Type", "text/html")
					io.WriteString(w, "<html>welcome</html>")
					return true
				}
			},
			func(ctx context.Context, c *httpstore.Client) error {
				_, err := c.Missing(ctx, []asl.Reference{refA})
				return err
			}, httpstore.ErrProtocol},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, httpstore.Options{})
			f.setHook(c.hook(f))
			err := c.call(t.Context(), f.c)
			if !errors.Is(err, c.want) {
				t.Fatalf("= %v, want %v", err, c.want)
			}
			if !strings.Contains(err.Error(), f.ts.URL) {
				t.Errorf("error %q does not name the URL", err)
			}
		})
	}
}

// TestTamperedUpload: bytes changed on the way to the server are refused
// by the server when the client sent X-Amduat-Expect-Ref (nothing stored),
// and caught by the client from the acknowledged reference otherwise.
func TestTamperedUpload(t *testing.T) {
	t.Parallel()
	a := asl.Untagged([]byte("sent in good faith"))
	want := asl.MustDerive(asl.HashSHA256, a)
	for _, streamed := range []bool{false, true} {
		t.Run(fmt.Sprintf("streamed=%v", streamed), func(t *testing.T) {
			f := newFixture(t, httpstore.Options{})
			var expect string
			f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
				if r.Method == http.MethodPost && r.URL.Path == httpstore.PathArtifacts {
					expect = r.Header.Get(httpstore.HeaderExpectRef)
					b, _ := io.ReadAll(r.Body)
					b[0] ^= 1
					r.Body = io.NopCloser(bytes.NewReader(b))
				}
				return false
			})
			var r io.Reader = bytes.NewReader(a.Bytes)
			if streamed {
				r = io.MultiReader(r)
			}
			_, err := f.c.Put(t.Context(), asl.HashSHA256, a.Header(), r)
			if !errors.Is(err, asl.ErrIntegrity) {
				t.Fatalf("Put through a tampering proxy = %v, want ErrIntegrity", err)
			}
			if !strings.Contains(err.Error(), want.String()) {
				t.Errorf("error %q does not name %s", err, want)
			}
			if streamed {
				if expect != "" {
					t.Errorf("streamed put sent %s %s", httpstore.HeaderExpectRef, expect)
				}
				return
			}
			if expect != want.String() {
				t.Errorf("in-memory put sent %s %q, want %s", httpstore.HeaderExpectRef, expect, want)
			}
			var he *httpstore.Error
			if !errors.As(err, &he) || he.Status != http.StatusUnprocessableEntity || he.Code != httpstore.CodeDigestMismatch {
				t.Errorf("error %v is not a 422 %s", err, httpstore.CodeDigestMismatch)
			}
			if n := f.st.Len(); n != 0 {
				t.Errorf("the server stored %d artifacts from a refused put", n)
			}
		})
	}
}

// TestRetry: idempotent requests are retried on 503 and 429 (honouring
// Retry-After) and on broken connections, a bounded number of times;
// others are not; cancellation ends the wait at once.
func TestRetry(t *testing.T) {
	t.Parallel()
	a := asl.Untagged([]byte("retried"))
	ref := asl.MustDerive(asl.HashSHA256, a)
	failFirst := func(n int, status int, retryAfter string) func(w http.ResponseWriter, r *http.Request) bool {
		var mu sync.Mutex
		seen := map[string]int{}
		return func(w http.ResponseWriter, r *http.Request) bool {
			mu.Lock()
			defer mu.Unlock()
			key := r.Method + " " + r.URL.Path
			seen[key]++
			if seen[key] > n {
				return false
			}
			io.Copy(io.Discard, r.Body)
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(httpstore.ErrorBody{Error: "busy", Code: httpstore.CodeUnavailable})
			return true
		}
	}
	t.Run("503 then success", func(t *testing.T) {
		f := newFixture(t, httpstore.Options{})
		f.setHook(failFirst(2, http.StatusServiceUnavailable, ""))
		ctx := t.Context()
		steps := []struct {
			key string
			do  func() error
		}{
			{"POST " + httpstore.PathArtifacts, func() error { _, err := asl.PutArtifact(ctx, f.c, asl.HashSHA256, a); return err }},
			{"GET " + httpstore.PathArtifact + ref.String(), func() error { _, err := asl.Get(ctx, f.c, ref, 0); return err }},
			{"POST " + httpstore.PathMissing, func() error { _, err := f.c.Missing(ctx, []asl.Reference{ref}); return err }},
			{"POST " + httpstore.PathBatch, func() error {
				_, err := f.c.PutBatch(ctx, asl.HashSHA256, []asl.Artifact{asl.Untagged([]byte("new"))})
				return err
			}},
			{"GET " + httpstore.PathArtifacts, func() error {
				return f.c.Enumerate(ctx, asl.Reference{}, func(asl.Info) error { return nil })
			}},
		}
		for _, s := range steps {
			if err := s.do(); err != nil {
				t.Fatalf("%s: %v", s.key, err)
			}
			if n := f.count(s.key); n != 3 {
				t.Errorf("%s: %d requests, want 3 (two 503s, then success)", s.key, n)
			}
		}
	})
	t.Run("bounded", func(t *testing.T) {
		f := newFixture(t, httpstore.Options{Retries: 2})
		f.setHook(failFirst(100, http.StatusServiceUnavailable, ""))
		_, err := f.c.Stat(t.Context(), ref)
		var he *httpstore.Error
		if !errors.As(err, &he) || he.Status != http.StatusServiceUnavailable {
			t.Fatalf("Stat = %v, want a 503 *Error", err)
		}
		if n := f.count("GET " + httpstore.PathArtifact + ref.String()); n != 3 {
			t.Errorf("%d requests, want 3", n)
		}
	})
	t.Run("not idempotent", func(t *testing.T) {
		f := newFixture(t, httpstore.Options{})
		f.setHook(failFirst(1, http.StatusServiceUnavailable, ""))
		err := f.c.DoJSON(t.Context(), http.MethodPost, httpstore.PathMissing, false, httpstore.RefsBody{Refs: []asl.Reference{ref}}, nil)
		if err == nil || f.count("POST "+httpstore.PathMissing) != 1 {
			t.Fatalf("DoJSON(idempotent=false) = %v after %d requests, want the 503 after 1", err, f.count("POST "+httpstore.PathMissing))
		}
	})
	t.Run("Retry-After", func(t *testing.T) {
		f := newFixture(t, httpstore.Options{})
		f.setHook(failFirst(1, http.StatusTooManyRequests, "1"))
		start := time.Now()
		if _, err := f.c.Missing(t.Context(), []asl.Reference{ref}); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 900*time.Millisecond {
			t.Errorf("retried after %s, before the Retry-After of 1s", d)
		}
	})
	t.Run("Retry-After too long", func(t *testing.T) {
		f := newFixture(t, httpstore.Options{RetryMaxWait: 100 * time.Millisecond})
		f.setHook(failFirst(1, http.StatusTooManyRequests, "3600"))
		_, err := f.c.Missing(t.Context(), []asl.Reference{ref})
		var he *httpstore.Error
		if !errors.As(err, &he) || he.Status != http.StatusTooManyRequests || he.RetryAfter != time.Hour ||
			!strings.Contains(err.Error(), "retry after 1h") {
			t.Fatalf("= %v, want the 429 at once, saying when to retry", err)
		}
	})
	t.Run("retry past the deadline", func(t *testing.T) {
		// The retry would come an hour after a deadline a minute away: the
		// client gives up at once, saying so, instead of waiting for the
		// deadline (whose error would not say it).
		f := newFixture(t, httpstore.Options{RetryMaxWait: 2 * time.Hour})
		f.setHook(failFirst(1, http.StatusServiceUnavailable, "3600"))
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		_, err := f.c.Missing(ctx, []asl.Reference{ref})
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "would pass the deadline") {
			t.Fatalf("= %v, want the deadline at once, saying the retry would pass it", err)
		}
		if n := f.count("POST " + httpstore.PathMissing); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
	})
	t.Run("canceled while waiting", func(t *testing.T) {
		// Canceled once the 503 (retry in an hour) is answered: the call
		// returns the cancellation, not after the hour.
		f := newFixture(t, httpstore.Options{RetryMaxWait: 2 * time.Hour})
		answered := make(chan struct{})
		var once sync.Once
		fail := failFirst(1, http.StatusServiceUnavailable, "3600")
		f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
			if !fail(w, r) {
				return false
			}
			once.Do(func() { close(answered) })
			return true
		})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := f.c.Missing(ctx, []asl.Reference{ref})
			done <- err
		}()
		<-answered
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("= %v, want the cancellation", err)
			}
		case <-time.After(time.Minute): // a hang bound against the hour's wait, not a timing
			t.Fatal("still waiting a minute after the cancellation")
		}
	})
	t.Run("broken connection", func(t *testing.T) {
		f := newFixture(t, httpstore.Options{})
		if _, err := f.st.PutBatch(t.Context(), asl.HashSHA256, []asl.Artifact{a}); err != nil {
			t.Fatal(err)
		}
		var once sync.Once
		f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
			hit := false
			once.Do(func() { hit = true })
			if !hit {
				return false
			}
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				panic(err)
			}
			conn.Close()
			return true
		})
		if _, err := asl.Get(t.Context(), f.c, ref, 0); err != nil {
			t.Fatalf("Get after a dropped connection: %v", err)
		}
	})
	t.Run("server gone", func(t *testing.T) {
		f := newFixture(t, httpstore.Options{Retries: 1})
		f.ts.Close()
		_, err := f.c.Stat(t.Context(), ref)
		if err == nil || !strings.Contains(err.Error(), "GET "+f.ts.URL+httpstore.PathArtifact+ref.String()) {
			t.Fatalf("Stat on a closed server = %v, want an error naming the request", err)
		}
		if asl.IsContentError(err) {
			t.Errorf("a connection error %v is a content error", err)
		}
	})
}

// TestErrorMessages: errors name the method, the URL, the reference and
// the status, and map the store codes to the asl sentinels.
func TestErrorMessages(t *testing.T) {
	t.Parallel()
	f := newFixture(t, httpstore.Options{})
	ctx := t.Context()
	absent := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("absent")))
	_, _, err := f.c.Fetch(ctx, absent)
	prefix := "GET " + f.ts.URL + httpstore.PathArtifact + absent.String() + ": 404 ERR_NOT_FOUND: "
	if !errors.Is(err, asl.ErrNotFound) || !strings.HasPrefix(err.Error(), prefix) {
		t.Errorf("Fetch(absent) = %q, want ErrNotFound starting %q", err, prefix)
	}
	if _, err := f.c.Stat(ctx, absent); !errors.Is(err, asl.ErrNotFound) {
		t.Errorf("Stat(absent) = %v, want ErrNotFound", err)
	}

	a := asl.Untagged([]byte("no room"))
	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInsufficientStorage)
		io.WriteString(w, `{"error":"disk full","code":"no_space"}`)
		return true
	})
	_, err = asl.PutArtifact(ctx, f.c, asl.HashSHA256, a)
	want := "POST " + f.ts.URL + httpstore.PathArtifacts + "?hash=sha256: " + asl.MustDerive(asl.HashSHA256, a).String() + ": 507 no_space: disk full"
	if err == nil || err.Error() != want {
		t.Errorf("Put on a full server = %q, want %q", err, want)
	}
	if asl.IsContentError(err) {
		t.Errorf("507 %v is a content error", err)
	}

	codes := []struct {
		status int
		code   string
		want   error
	}{
		{500, httpstore.CodeIntegrity, asl.ErrIntegrity},
		{501, httpstore.CodeUnsupported, asl.ErrUnsupported},
		{400, httpstore.CodeBadReference, asl.ErrIntegrity},
		{404, httpstore.CodeNoRoute, nil},
		{500, httpstore.CodeIO, nil},
	}
	for _, c := range codes {
		f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
			w.WriteHeader(c.status)
			fmt.Fprintf(w, `{"error":"x","code":%q}`, c.code)
			return true
		})
		_, err := f.c.Stat(ctx, absent)
		var he *httpstore.Error
		if !errors.As(err, &he) || he.Status != c.status || he.Code != c.code {
			t.Errorf("%d %s: %v", c.status, c.code, err)
		}
		if c.want != nil && !errors.Is(err, c.want) || c.want == nil && asl.IsContentError(err) {
			t.Errorf("%d %s: %v, want it to wrap %v", c.status, c.code, err, c.want)
		}
	}
}

// TestAuth: the bearer token is sent, never shown; 401 and 403 say to set
// AMDUAT_TOKEN.
func TestAuth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.json")
	readTok, err := server.AddToken(tokens, "reader", []string{"read"})
	if err != nil {
		t.Fatal(err)
	}
	auth, err := server.LoadAuth(tokens)
	if err != nil {
		t.Fatal(err)
	}
	st := mem{memstore.New()}
	ref, err := asl.PutArtifact(t.Context(), st, asl.HashSHA256, asl.Untagged([]byte("secret")))
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(server.Config{Store: st, Auth: auth})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()

	anon, err := httpstore.Open(t.Context(), ts.URL, httpstore.Options{})
	if err != nil {
		t.Fatalf("Open without a token: %v", err)
	}
	_, _, err = anon.Fetch(t.Context(), ref)
	var he *httpstore.Error
	if !errors.As(err, &he) || he.Status != http.StatusUnauthorized || !strings.Contains(err.Error(), "AMDUAT_TOKEN") ||
		!strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), ref.String()) {
		t.Errorf("Fetch without a token = %v, want a 401 naming the ref and AMDUAT_TOKEN", err)
	}

	reader, err := httpstore.Open(t.Context(), ts.URL, httpstore.Options{Token: readTok})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := asl.Get(t.Context(), reader, ref, 0); err != nil || string(got.Bytes) != "secret" {
		t.Fatalf("Get with a read token = %q, %v", got.Bytes, err)
	}
	_, err = asl.PutArtifact(t.Context(), reader, asl.HashSHA256, asl.Untagged([]byte("x")))
	if !errors.As(err, &he) || he.Status != http.StatusForbidden || !strings.Contains(err.Error(), "AMDUAT_TOKEN") {
		t.Errorf("Put with a read token = %v, want a 403 naming AMDUAT_TOKEN", err)
	}
	if n := strings.Count(err.Error(), "scope"); n != 1 {
		t.Errorf("Put with a read token = %v: the missing scope is said %d times, want once", err, n)
	}
	if strings.Contains(err.Error(), readTok) {
		t.Errorf("error %q shows the token", err)
	}
	if m := reader.Meta(); len(m.Scopes) != 1 || m.Scopes[0] != "read" {
		t.Errorf("Meta().Scopes = %v, want [read]", m.Scopes)
	}
	// A token the server does not know is refused even where none is
	// needed.
	bad, err := httpstore.Open(t.Context(), ts.URL, httpstore.Options{Token: "not-a-token"})
	if err == nil {
		_, err = bad.Stat(t.Context(), ref)
	}
	if !errors.As(err, &he) || he.Status != http.StatusUnauthorized || strings.Contains(err.Error(), "not-a-token") ||
		!strings.Contains(err.Error(), "AMDUAT_TOKEN") {
		t.Errorf("with a bad token: %v, want a 401 naming AMDUAT_TOKEN and not the token", err)
	}
	t.Logf("bad token: %v", err)
}

// TestOpen: Open refuses what is not an amduat API v1 server, and serves
// a base URL with a path prefix.
func TestOpen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	notAmduat := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<html>not found</html>", http.StatusNotFound)
	}))
	defer notAmduat.Close()
	otherAPI := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"api":"something/v2","default_hash":"sha256"}`)
	}))
	defer otherAPI.Close()
	oddHash := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"api":"amduat/v1","default_hash":"md5"}`)
	}))
	defer oddHash.Close()
	for _, c := range []struct {
		url, want string
		is        error
	}{
		{notAmduat.URL, "not an amduat HTTP API v1 server", nil},
		{otherAPI.URL, `says api "something/v2"`, nil},
		{oddHash.URL, "default hash", asl.ErrUnsupported},
		{"ftp://example.com", "http:// or https://", nil},
		{"http://user:hunter2@" + strings.TrimPrefix(notAmduat.URL, "http://"), "not an amduat", nil},
	} {
		_, err := httpstore.Open(ctx, c.url, httpstore.Options{Retries: -1})
		if err == nil || !strings.Contains(err.Error(), c.want) || c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("Open(%s) = %v, want an error saying %q", c.url, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open error %q shows the password", err)
		}
	}

	s, err := server.New(server.Config{Store: mem{memstore.New()}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/amduat/", http.StripPrefix("/amduat", s.Handler()))
	ts := httptest.NewServer(mux)
	defer ts.Close()
	c, err := httpstore.Open(ctx, ts.URL+"/amduat/", httpstore.Options{})
	if err != nil {
		t.Fatalf("Open with a path prefix: %v", err)
	}
	a := asl.Tagged(3, []byte("prefixed"))
	ref, err := asl.PutArtifact(ctx, c, c.DefaultHash(), a)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := asl.Get(ctx, c, ref, 0); err != nil || !bytes.Equal(got.Bytes, a.Bytes) {
		t.Fatalf("Get = %q, %v", got.Bytes, err)
	}
	if c.Meta().API != httpstore.APIName || c.DefaultHash() != asl.HashSHA256 {
		t.Errorf("Meta = %+v", c.Meta())
	}
	c.Close()
	if _, err := c.Stat(ctx, ref); !errors.Is(err, httpstore.ErrClosed) {
		t.Errorf("Stat after Close = %v, want ErrClosed", err)
	}
}

// TestPutBatchRequests: PutBatch uploads only what the server lacks, each
// artifact once, in batches within the client's and the server's bounds;
// an artifact too large for a batch goes alone.
func TestPutBatchRequests(t *testing.T) {
	t.Parallel()
	f := newFixture(t, httpstore.Options{BatchCount: 3, BatchBytes: 1000})
	ctx := t.Context()
	var mu sync.Mutex
	var frames []int
	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == httpstore.PathBatch {
			b, _ := io.ReadAll(r.Body)
			arts, err := httpstore.ReadFrames(bytes.NewReader(b), 1<<20, 1<<30)
			if err != nil {
				panic(err)
			}
			mu.Lock()
			frames = append(frames, len(arts))
			mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		return false
	})
	var arts []asl.Artifact
	for i := range 8 {
		arts = append(arts, asl.Untagged([]byte(fmt.Sprintf("artifact %d", i))))
	}
	big := asl.Untagged(bytes.Repeat([]byte{1}, 5000))
	if _, err := f.st.PutBatch(ctx, asl.HashSHA256, arts[:2]); err != nil {
		t.Fatal(err)
	}
	in := append(append([]asl.Artifact{}, arts...), arts[3], arts[0], big)
	refs, err := f.c.PutBatch(ctx, asl.HashSHA256, in)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range in {
		if refs[i] != asl.MustDerive(asl.HashSHA256, a) {
			t.Fatalf("ref %d = %s", i, refs[i])
		}
	}
	// 6 new small artifacts in batches of at most 3; the big one alone.
	if fmt.Sprint(frames) != "[3 3]" {
		t.Errorf("batch requests carried %v frames, want [3 3]", frames)
	}
	if n := f.count("POST " + httpstore.PathArtifacts); n != 1 {
		t.Errorf("%d single puts, want 1 (the artifact above BatchBytes)", n)
	}
	if n := f.count("POST " + httpstore.PathMissing); n != 1 {
		t.Errorf("%d missing requests, want 1", n)
	}
	if f.st.Len() != 9 {
		t.Errorf("server holds %d artifacts, want 9", f.st.Len())
	}
}

// TestIndexRoutes: lookups of absent keys, the read-only index, spaces the
// API cannot name.
func TestIndexRoutes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, httpstore.Options{})
	ctx := t.Context()
	_, err := f.c.PutIndexed(ctx, asl.HashSHA256, nil, nil)
	if !errors.Is(err, asl.ErrUnsupported) || !strings.Contains(err.Error(), "POST /v1/pel/run") {
		t.Errorf("PutIndexed = %v, want ErrUnsupported pointing at POST /v1/pel/run", err)
	}
	if _, ok, err := f.c.LookupIndex(ctx, "surf.trace", []byte{1, 2}); ok || err != nil {
		t.Errorf("LookupIndex(absent) = %v, %v", ok, err)
	}
	if _, _, err := f.c.LookupIndex(ctx, "Bad Space", []byte{1}); !errors.Is(err, asl.ErrUnsupported) {
		t.Errorf("LookupIndex(bad space) = %v, want ErrUnsupported", err)
	}
	if err := f.c.ScanIndex(ctx, "a/b", nil, nil); !errors.Is(err, asl.ErrUnsupported) {
		t.Errorf("ScanIndex(bad space) = %v, want ErrUnsupported", err)
	}
}

// pattern yields n bytes of a repeating 64 KiB block, shifted each round so
// that no two blocks are alike.
type pattern struct {
	block []byte
	off   int64
	n     int64
}

func newPattern(n int64) *pattern {
	b := make([]byte, 64<<10)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return &pattern{block: b, n: n}
}

func (p *pattern) Read(q []byte) (int, error) {
	if p.off == p.n {
		return 0, io.EOF
	}
	q = q[:min(int64(len(q)), p.n-p.off)]
	k := 0
	for k < len(q) {
		i := (p.off + int64(k)) % int64(len(p.block))
		c := copy(q[k:], p.block[i:])
		for j := k; j < k+c; j++ {
			q[j] ^= byte((p.off + int64(j)) >> 16)
		}
		k += c
	}
	p.off += int64(len(q))
	return len(q), nil
}

// TestStreamingMemory: a large Put and Fetch stream through the client in
// bounded memory (8 MiB allocated at most). The server here is a sink and
// a source of the same bytes (it hashes what it receives, serves what it
// generates), so what is measured is the client's memory. The artifact is
// 24 MiB by default, three times the bound, so that a client holding it
// whole fails; 48 MiB with AMDUAT_LONG=1 (internal/longtest; each MiB is
// generated three times, byte by byte under -race; issue 25).
func TestStreamingMemory(t *testing.T) {
	// Sequential: it reads the process's allocation total (runtime.MemStats).
	size := longtest.Logf(t, "artifact MiB", 24, 48) << 20
	hdr := asl.Header{Size: uint64(size), Tag: 9, HasTag: true}
	h, _ := asl.NewHasher(asl.HashSHA256, hdr)
	io.Copy(h, newPattern(int64(size)))
	ref, _ := h.Sum()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == httpstore.PathMeta:
			json.NewEncoder(w).Encode(httpstore.Meta{API: httpstore.APIName, DefaultHash: "sha256"})
		case r.Method == http.MethodPost && r.URL.Path == httpstore.PathArtifacts:
			tag, has, _ := httpstore.ParseTypeTag(r.Header.Get(httpstore.HeaderTypeTag))
			hh, _ := asl.NewHasher(asl.HashSHA256, asl.Header{Size: uint64(r.ContentLength), Tag: tag, HasTag: has})
			n, _ := io.Copy(hh, r.Body)
			got, err := hh.Sum()
			if err != nil || n != r.ContentLength {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			json.NewEncoder(w).Encode(httpstore.PutResponse{Ref: got, Size: uint64(n)})
		case r.Method == http.MethodGet && r.URL.Path == httpstore.PathArtifact+ref.String():
			w.Header().Set("Content-Length", strconv.Itoa(size))
			w.Header().Set(httpstore.HeaderTypeTag, httpstore.FormatTypeTag(hdr))
			io.Copy(w, newPattern(int64(size)))
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer ts.Close()
	c, err := httpstore.Open(t.Context(), ts.URL, httpstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	measure := func(what string, fn func() error) {
		t.Helper()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		runtime.ReadMemStats(&after)
		t.Logf("%s: %d KiB allocated", what, (after.TotalAlloc-before.TotalAlloc)>>10)
		// Client and server share this process; both stream.
		if n := after.TotalAlloc - before.TotalAlloc; n > 8<<20 {
			t.Errorf("%s of %d MiB allocated %d KiB", what, size>>20, n>>10)
		}
	}
	measure("Put", func() error {
		got, err := c.Put(t.Context(), asl.HashSHA256, hdr, newPattern(int64(size)))
		if err == nil && got != ref {
			err = fmt.Errorf("Put = %s, want %s", got, ref)
		}
		return err
	})
	measure("Fetch", func() error {
		rc, got, err := c.Fetch(t.Context(), ref)
		if err != nil {
			return err
		}
		defer rc.Close()
		if got != hdr {
			return fmt.Errorf("header %+v", got)
		}
		_, err = io.Copy(io.Discard, rc)
		return err
	})
}

// TestTamperedBatch: a batch whose last frame is changed on the way to the
// server is caught from the acknowledged references, on each of
// PutBatch's paths: a small batch (every reference asked about), a fresh
// one (sampled, then uploaded while it is hashed) and one whose sample
// finds stored artifacts. The error names the artifact and both
// references.
func TestTamperedBatch(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		n       int
		present bool // every other artifact is stored beforehand
		asks    int  // POST missing requests
	}{{"small", 10, false, 1}, {"fresh", 100, false, 1}, {"half present", 100, true, 2}} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, httpstore.Options{})
			arts := make([]asl.Artifact, c.n)
			for i := range arts {
				arts[i] = asl.Untagged(fmt.Appendf(nil, "%s artifact %d", c.name, i))
				if c.present && i%2 == 0 {
					if _, err := asl.PutArtifact(t.Context(), f.st, asl.HashSHA256, arts[i]); err != nil {
						t.Fatal(err)
					}
				}
			}
			last := c.n - 1
			if c.present && last%2 == 0 {
				last-- // the last artifact sent
			}
			f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
				if r.Method == http.MethodPost && r.URL.Path == httpstore.PathBatch {
					b, _ := io.ReadAll(r.Body)
					b[len(b)-1] ^= 1
					r.Body = io.NopCloser(bytes.NewReader(b))
				}
				return false
			})
			_, err := f.c.PutBatch(t.Context(), asl.HashSHA256, arts)
			want := asl.MustDerive(asl.HashSHA256, arts[last])
			if !errors.Is(err, asl.ErrIntegrity) || !strings.Contains(err.Error(), fmt.Sprintf("artifact %d:", last)) || !strings.Contains(err.Error(), want.String()) {
				t.Fatalf("PutBatch through a tampering proxy = %v, want ErrIntegrity naming artifact %d (%s)", err, last, want)
			}
			f.mu.Lock()
			asks := f.hits["POST "+httpstore.PathMissing]
			f.mu.Unlock()
			if asks != c.asks {
				t.Errorf("%d missing requests, want %d", asks, c.asks)
			}
		})
	}
}

// TestFreshBatchWithRepeats: a fresh batch (sampled, uploaded whole) that
// repeats artifacts stores each once and returns every reference in input
// order.
func TestFreshBatchWithRepeats(t *testing.T) {
	t.Parallel()
	f := newFixture(t, httpstore.Options{})
	arts := make([]asl.Artifact, 100)
	for i := range arts {
		arts[i] = asl.Untagged(fmt.Appendf(nil, "repeat %d", i%7))
	}
	refs, err := f.c.PutBatch(t.Context(), asl.HashSHA256, arts)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range arts {
		if want := asl.MustDerive(asl.HashSHA256, a); refs[i] != want {
			t.Fatalf("ref %d: %s, want %s", i, refs[i], want)
		}
	}
	if n := f.st.Len(); n != 7 {
		t.Fatalf("the server holds %d artifacts, want 7", n)
	}
}

// TestFetchCutShort: a body that breaks off is told apart (issue 20): when
// a new request for the byte where it broke gets that byte, the network
// failed (an I/O error, not ERR_INTEGRITY); when the server cannot send it
// either, the stored copy is damaged (ERR_INTEGRITY).
func TestFetchCutShort(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		probeCut  bool
		integrity bool
	}{{"network", false, false}, {"damaged", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, httpstore.Options{})
			a := asl.Untagged(bytes.Repeat([]byte("cut short "), 300))
			ref, err := asl.PutArtifact(t.Context(), f.c, asl.HashSHA256, a)
			if err != nil {
				t.Fatal(err)
			}
			f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
				if !isArtifactGet(r) || r.Header.Get("Range") != "" && !tc.probeCut {
					return false
				}
				rec := f.record(r)
				for k, v := range rec.Header() {
					w.Header()[k] = v
				}
				w.WriteHeader(rec.Code)
				b := rec.Body.Bytes()
				w.Write(b[:len(b)/2])
				w.(http.Flusher).Flush()
				panic(http.ErrAbortHandler) // the connection breaks
			})
			_, err = asl.Get(t.Context(), f.c, ref, 0)
			if err == nil {
				t.Fatal("Get succeeded")
			}
			if got := errors.Is(err, asl.ErrIntegrity); got != tc.integrity || !strings.Contains(err.Error(), "body ends after") {
				t.Fatalf("Get: %v; ERR_INTEGRITY %v, want %v, after a body cut short", err, got, tc.integrity)
			}
		})
	}
}
