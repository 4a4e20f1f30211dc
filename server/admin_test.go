package server

import (
	"encoding/json"
	"errors"
	"net"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/report"
)

// adminFixture is a server with a token file (tokens "admin" with the admin
// scope only and "writer" with read, write and run) holding a run: its
// program, inputs, output and result, the result pinned by the steps.
type adminFixture struct {
	s             *Server
	ts            *httptest.Server
	admin, writer map[string]string
	run           report.Run
	loose         asl.Reference // stored, reached by nothing
}

func newAdminFixture(t *testing.T, cfg Config) *adminFixture {
	t.Helper()
	file := filepath.Join(t.TempDir(), "tokens.json")
	admin, err := AddToken(file, "admin", []string{"admin"})
	if err != nil {
		t.Fatal(err)
	}
	writer, err := AddToken(file, "writer", []string{"read", "write", "run"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Auth, err = LoadAuth(file); err != nil {
		t.Fatal(err)
	}
	s, ts, _ := newTestServer(t, cfg)
	f := &adminFixture{s: s, ts: ts, admin: map[string]string{"Authorization": "Bearer " + admin},
		writer: map[string]string{"Authorization": "Bearer " + writer}}
	f.run = f.runConcat(t, "hello, ", "amduat\n")
	f.loose = f.put(t, "loose")
	return f
}

func (f *adminFixture) put(t *testing.T, text string) asl.Reference {
	t.Helper()
	r := do(t, f.ts, call{method: "POST", path: "/v1/artifacts", body: []byte(text), header: f.writer})
	if r.status != 200 {
		t.Fatalf("put %q: %d %s", text, r.status, r.body)
	}
	return asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte(text)))
}

func (f *adminFixture) runConcat(t *testing.T, a, b string) report.Run {
	t.Helper()
	prog := `{"nodes":[{"id":1,"op":"pel.bytes.concat","version":1,"inputs":[{"input":0},{"input":1}]}],"roots":[{"node":1}]}`
	r := do(t, f.ts, call{method: "POST", path: "/v1/pel/programs", body: []byte(prog), header: f.writer})
	var b0 report.Build
	if r.status != 200 || json.Unmarshal(r.body, &b0) != nil {
		t.Fatalf("build: %d %s", r.status, r.body)
	}
	body, _ := json.Marshal(report.RunRequest{ProgramRef: b0.Ref, InputRefs: []asl.Reference{f.put(t, a), f.put(t, b)}})
	r = do(t, f.ts, call{method: "POST", path: "/v1/pel/run", body: body, header: f.writer})
	var run report.Run
	if r.status != 200 || json.Unmarshal(r.body, &run) != nil || run.Status != "OK" {
		t.Fatalf("run: %d %s", r.status, r.body)
	}
	return run
}

func TestAdminRoutes(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, Config{})
	res, out := f.run.ResultRef, f.run.OutputRefs[0]
	absent := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("never stored")))
	js := func(v any) []byte { b, _ := json.Marshal(v); return b }
	type pinsBody = httpstore.PinsResponse
	steps := []struct {
		name   string
		call   call
		token  map[string]string // nil: no Authorization
		status int
		code   string
		want   string // the exact body, when not an error ("" skips)
		check  func(t *testing.T, body []byte)
	}{
		// Scopes.
		{name: "pins without token", call: call{method: "GET", path: "/v1/pins"}, status: 401, code: httpstore.CodeUnauthorized},
		{name: "pins with a write token", call: call{method: "GET", path: "/v1/pins"}, token: f.writer, status: 403, code: httpstore.CodeForbidden},
		{name: "gc with a write token", call: call{method: "POST", path: "/v1/gc", body: []byte(`{}`)}, token: f.writer, status: 403, code: httpstore.CodeForbidden},
		{name: "delete with a write token", call: call{method: "POST", path: "/v1/artifacts/delete", body: js(httpstore.DeleteRequest{Refs: []asl.Reference{f.loose}})}, token: f.writer, status: 403, code: httpstore.CodeForbidden},
		{name: "admin cannot read", call: call{method: "GET", path: "/v1/artifacts/" + f.loose.String()}, token: f.admin, status: 403, code: httpstore.CodeForbidden},
		{name: "no pins", call: call{method: "GET", path: "/v1/pins"}, token: f.admin, status: 200, want: `{"pins":[]}` + "\n"},

		// Pin add.
		{name: "pin", call: call{method: "POST", path: "/v1/pins", body: js(httpstore.PinRequest{Name: "run", Ref: res})}, token: f.admin, status: 200,
			want: `{"name":"run","ref":"` + res.String() + `"}` + "\n"},
		{name: "pin again", call: call{method: "POST", path: "/v1/pins", body: js(httpstore.PinRequest{Name: "run", Ref: res})}, token: f.admin, status: 200},
		{name: "re-point without force", call: call{method: "POST", path: "/v1/pins", body: js(httpstore.PinRequest{Name: "run", Ref: f.loose})}, token: f.admin, status: 409, code: httpstore.CodePinExists},
		{name: "re-point with force", call: call{method: "POST", path: "/v1/pins", body: js(httpstore.PinRequest{Name: "other", Ref: f.loose})}, token: f.admin, status: 200},
		{name: "force back", call: call{method: "POST", path: "/v1/pins", body: []byte(`{"name":"other","ref":"` + res.String() + `","force":true}`)}, token: f.admin, status: 200},
		{name: "pin absent", call: call{method: "POST", path: "/v1/pins", body: js(httpstore.PinRequest{Name: "x", Ref: absent})}, token: f.admin, status: 404, code: httpstore.CodeNotFound},
		{name: "pin empty name", call: call{method: "POST", path: "/v1/pins", body: js(httpstore.PinRequest{Name: "", Ref: res})}, token: f.admin, status: 400, code: httpstore.CodeBadRequest},
		{name: "pin control character", call: call{method: "POST", path: "/v1/pins", body: js(httpstore.PinRequest{Name: "a\nb", Ref: res})}, token: f.admin, status: 400, code: httpstore.CodeBadRequest},
		{name: "pin long name", call: call{method: "POST", path: "/v1/pins", body: js(httpstore.PinRequest{Name: strings.Repeat("n", 256), Ref: res})}, token: f.admin, status: 400, code: httpstore.CodeBadRequest},
		{name: "pin without ref", call: call{method: "POST", path: "/v1/pins", body: []byte(`{"name":"x"}`)}, token: f.admin, status: 400, code: httpstore.CodeBadReference},
		{name: "pin malformed ref", call: call{method: "POST", path: "/v1/pins", body: []byte(`{"name":"x","ref":"00zz"}`)}, token: f.admin, status: 400, code: httpstore.CodeBadReference},
		{name: "pin unknown field", call: call{method: "POST", path: "/v1/pins", body: []byte(`{"name":"x","ref":"` + res.String() + `","forse":true}`)}, token: f.admin, status: 400, code: httpstore.CodeBadRequest},
		{name: "pin trailing data", call: call{method: "POST", path: "/v1/pins", body: []byte(`{"name":"x","ref":"` + res.String() + `"} {}`)}, token: f.admin, status: 400, code: httpstore.CodeBadRequest},
		{name: "pins wrong method", call: call{method: "PUT", path: "/v1/pins", body: []byte(`{}`)}, token: f.admin, status: 405, code: httpstore.CodeMethod},
		{name: "pins listed", call: call{method: "GET", path: "/v1/pins"}, token: f.admin, status: 200, check: func(t *testing.T, b []byte) {
			var p pinsBody
			if json.Unmarshal(b, &p) != nil || len(p.Pins) != 2 || p.Pins[0] != (httpstore.PinJSON{Name: "other", Ref: res}) || p.Pins[1] != (httpstore.PinJSON{Name: "run", Ref: res}) {
				t.Fatalf("pins %s", b)
			}
		}},

		// rm.
		{name: "rm refused", call: call{method: "POST", path: "/v1/artifacts/delete", body: js(httpstore.DeleteRequest{Refs: []asl.Reference{res, out, f.loose}})}, token: f.admin, status: 200,
			check: func(t *testing.T, b []byte) {
				want := httpstore.DeleteResponse{Refs: []httpstore.DeleteItem{
					{Ref: res, State: "refused", Reason: "pinned as other"},
					{Ref: out, State: "refused", Reason: "reachable from pin other"},
					{Ref: f.loose, State: "kept"},
				}}
				if string(b) != string(js(want))+"\n" {
					t.Fatalf("rm answered %s\nwant %s", b, js(want))
				}
			}},
		{name: "rm loose and absent", call: call{method: "POST", path: "/v1/artifacts/delete", body: js(httpstore.DeleteRequest{Refs: []asl.Reference{f.loose, absent}})}, token: f.admin, status: 200,
			want: string(js(httpstore.DeleteResponse{Refs: []httpstore.DeleteItem{{Ref: f.loose, State: "deleted", Deleted: true}, {Ref: absent, State: "missing"}}})) + "\n"},
		{name: "rm forced", call: call{method: "POST", path: "/v1/artifacts/delete", body: js(httpstore.DeleteRequest{Refs: []asl.Reference{out}, Force: true})}, token: f.admin, status: 200,
			want: string(js(httpstore.DeleteResponse{Refs: []httpstore.DeleteItem{{Ref: out, State: "deleted", Forced: "reachable from pin other", Deleted: true}}})) + "\n"},
		{name: "rm null ref", call: call{method: "POST", path: "/v1/artifacts/delete", body: []byte(`{"refs":[null]}`)}, token: f.admin, status: 400, code: httpstore.CodeBadReference},
		{name: "rm malformed ref", call: call{method: "POST", path: "/v1/artifacts/delete", body: []byte(`{"refs":["0001"]}`)}, token: f.admin, status: 400, code: httpstore.CodeBadReference},
		{name: "rm no refs", call: call{method: "POST", path: "/v1/artifacts/delete", body: []byte(`{"refs":[]}`)}, token: f.admin, status: 200, want: `{"refs":[]}` + "\n"},

		// Unpin.
		{name: "unpin", call: call{method: "POST", path: "/v1/pins/remove", body: []byte(`{"names":["run","nope"]}`)}, token: f.admin, status: 200,
			want: `{"removed":["run"],"missing":["nope"]}` + "\n"},
		{name: "unpin bad body", call: call{method: "POST", path: "/v1/pins/remove", body: []byte(`{"names":"run"}`)}, token: f.admin, status: 400, code: httpstore.CodeBadRequest},

		// gc: the pin "other" keeps the run's result and what it reaches.
		{name: "gc negative", call: call{method: "POST", path: "/v1/gc", body: []byte(`{"keep_runs":-1}`)}, token: f.admin, status: 400, code: httpstore.CodeBadRequest},
		{name: "gc unknown option", call: call{method: "POST", path: "/v1/gc", body: []byte(`{"dryrun":true}`)}, token: f.admin, status: 400, code: httpstore.CodeBadRequest},
		{name: "gc dry run", call: call{method: "POST", path: "/v1/gc", body: []byte(`{"dry_run":true}`)}, token: f.admin, status: 200, check: func(t *testing.T, b []byte) {
			var rep httpstore.GCReport
			if json.Unmarshal(b, &rep) != nil || !rep.DryRun || rep.Roots != 1 || rep.Deleted != 0 {
				t.Fatalf("dry run %s", b)
			}
		}},
		{name: "unpin other", call: call{method: "POST", path: "/v1/pins/remove", body: []byte(`{"names":["other"]}`)}, token: f.admin, status: 200},
		{name: "gc", call: call{method: "POST", path: "/v1/gc", body: []byte(`{}`)}, token: f.admin, status: 200, check: func(t *testing.T, b []byte) {
			var rep httpstore.GCReport
			if json.Unmarshal(b, &rep) != nil || rep.DryRun || rep.Roots != 0 || rep.Deleted == 0 || rep.Deleted != rep.Stored {
				t.Fatalf("gc %s", b)
			}
		}},
		{name: "result collected", call: call{method: "GET", path: "/v1/artifacts/" + res.String()}, token: f.writer, status: 404, code: httpstore.CodeNotFound},
	}
	for _, st := range steps {
		st.call.header = st.token
		r := do(t, f.ts, st.call)
		if r.status != st.status {
			t.Fatalf("%s: status %d, want %d: %s", st.name, r.status, st.status, r.body)
		}
		if st.code != "" {
			if got := errorCode(t, r); got != st.code {
				t.Fatalf("%s: code %s, want %s: %s", st.name, got, st.code, r.body)
			}
		}
		if st.want != "" && string(r.body) != st.want {
			t.Fatalf("%s: body %s, want %s", st.name, r.body, st.want)
		}
		if st.check != nil {
			st.check(t, r.body)
		}
	}

	// The scopes the admin token has, and the pin history with its actor
	// when the store keeps one.
	r := do(t, f.ts, call{method: "GET", path: "/v1/meta", header: f.admin})
	var m httpstore.Meta
	if json.Unmarshal(r.body, &m) != nil || strings.Join(m.Scopes, ",") != "admin" {
		t.Fatalf("meta for the admin token: %s", r.body)
	}
	r = do(t, f.ts, call{method: "GET", path: "/v1/pins/log?name=run", header: f.admin})
	if _, ok := f.s.store.(asl.PinLogger); !ok {
		if r.status != 501 || errorCode(t, r) != httpstore.CodeUnsupported {
			t.Fatalf("pin log without a PinLogger: %d %s", r.status, r.body)
		}
		return
	}
	var log httpstore.PinLogResponse
	if r.status != 200 || json.Unmarshal(r.body, &log) != nil || len(log.Changes) != 2 {
		t.Fatalf("pin log: %d %s", r.status, r.body)
	}
	if c := log.Changes[0]; c.Name != "run" || c.Old != nil || c.New == nil || *c.New != res || c.Actor != "admin" {
		t.Fatalf("first change of run: %+v", c)
	}
	if c := log.Changes[1]; c.Old == nil || *c.Old != res || c.New != nil {
		t.Fatalf("removal of run: %+v", c)
	}
}

// hiddenStore serves an embedded store with only the capabilities of
// Backend and asl.Pinner: no pin history, no deletion, no gc.
type hiddenStore struct {
	Backend
	asl.Pinner
}

func TestAdminUnsupported(t *testing.T) {
	t.Parallel()
	_, _, st := newTestServer(t, Config{})
	s, err := New(Config{Store: hiddenStore{st, st}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	for _, c := range []call{
		{method: "GET", path: "/v1/pins/log"},
		{method: "POST", path: "/v1/artifacts/delete", body: []byte(`{"refs":[]}`)},
		{method: "POST", path: "/v1/gc", body: []byte(`{}`)},
	} {
		r := do(t, ts, c)
		if r.status != 501 || errorCode(t, r) != httpstore.CodeUnsupported {
			t.Errorf("%s %s: %d %s, want 501 %s", c.method, c.path, r.status, r.body, httpstore.CodeUnsupported)
		}
	}
	// Without a token file every request has every scope.
	r := do(t, ts, call{method: "GET", path: "/v1/meta"})
	var m httpstore.Meta
	if json.Unmarshal(r.body, &m) != nil || strings.Join(m.Scopes, ",") != "read,write,run,admin,plan,approve" {
		t.Fatalf("meta without auth: %s", r.body)
	}
}

// deadlineListener hands out its connections with their read deadlines
// watched, each on accepted as well.
type deadlineListener struct {
	net.Listener
	accepted chan *deadlineConn
}

func (l *deadlineListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	dc := &deadlineConn{Conn: c, changed: make(chan struct{}, 1)}
	select {
	case l.accepted <- dc:
	default:
	}
	return dc, nil
}

// deadlineConn records the read deadlines set on a connection (net/http's
// and the server's) and whether a read ended at one: what the idle
// timeout does to a request, observed where it happens. Every change is
// signalled on changed.
type deadlineConn struct {
	net.Conn
	mu       sync.Mutex
	cur      time.Time // the read deadline now; zero: none
	last     time.Time // the last one set that was not zero
	timedOut bool      // a read ended at its deadline
	changed  chan struct{}
}

func (c *deadlineConn) note(f func()) {
	c.mu.Lock()
	f()
	c.mu.Unlock()
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

func (c *deadlineConn) SetReadDeadline(d time.Time) error {
	c.note(func() {
		c.cur = d
		if !d.IsZero() {
			c.last = d
		}
	})
	return c.Conn.SetReadDeadline(d)
}

func (c *deadlineConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.note(func() { c.timedOut = true })
	}
	return n, err
}

// outlastIdleTimeout sends c on a fresh connection to s while the test
// holds s.maint (which gc and runs wait for once their body is read), and
// releases the lock only when the idle timeout has had its chance to cut
// the request: the connection has no read deadline and the clock is past
// the last one set, or a read ended at its deadline (then the request is
// cut, as it should not be). It waits on those events, not on a guess of
// how long they take on a loaded machine.
func outlastIdleTimeout(t *testing.T, s *Server, c call) reply {
	t.Helper()
	l := &deadlineListener{accepted: make(chan *deadlineConn, 1)}
	ts := httptest.NewUnstartedServer(s.Handler())
	l.Listener = ts.Listener
	ts.Listener = l
	ts.Start()
	defer ts.Close()
	s.maint.Lock()
	locked := true
	defer func() {
		if locked {
			s.maint.Unlock()
		}
	}()
	done := make(chan reply, 1)
	go func() { done <- do(t, ts, c) }()
	conn := <-l.accepted
	hang := time.After(time.Minute) // a bound on a hang, not a timing
	for {
		conn.mu.Lock()
		cur, last, timedOut := conn.cur, conn.last, conn.timedOut
		conn.mu.Unlock()
		if timedOut || cur.IsZero() && !last.IsZero() && time.Now().After(last) {
			break
		}
		next := last
		if !cur.IsZero() {
			next = cur
		}
		var expiry <-chan time.Time
		if !next.IsZero() {
			expiry = time.After(time.Until(next) + time.Millisecond)
		}
		select {
		case <-conn.changed:
		case <-expiry:
		case r := <-done:
			t.Fatalf("%s %s answered while the maintenance lock was held: %d %s", c.method, c.path, r.status, r.body)
		case <-hang:
			t.Fatalf("%s %s: after a minute its connection still has a read deadline (last %v)", c.method, c.path, last)
		}
	}
	s.maint.Unlock()
	locked = false
	return <-done
}

// outlastIdle is the idle timeout of the outlast tests: long enough that
// a loaded machine gets a handler from its body's end to the lift of the
// read deadline (longRequest) within it.
const outlastIdle = time.Second

// TestGCOutlastsIdleTimeout: a collection that waits (here for the
// maintenance lock) past the expiry of the read deadline its body read
// set still completes: the deadline does not cancel it.
func TestGCOutlastsIdleTimeout(t *testing.T) {
	t.Parallel()
	s, _, _ := newTestServer(t, Config{Limits: Limits{IdleTimeout: outlastIdle}})
	if r := outlastIdleTimeout(t, s, call{method: "POST", path: "/v1/gc", body: []byte(`{}`)}); r.status != 200 {
		t.Fatalf("gc after waiting: %d %s", r.status, r.body)
	}
}

// TestRunOutlastsIdleTimeout: the same for a run (which waits here for a
// collection, holding the maintenance lock, to end).
func TestRunOutlastsIdleTimeout(t *testing.T) {
	t.Parallel()
	s, ts, _ := newTestServer(t, Config{Limits: Limits{IdleTimeout: outlastIdle}})
	prog := putProgram(t, ts)
	a := asl.MustDerive(asl.HashSHA256, asl.Untagged(hello))
	do(t, ts, call{method: "POST", path: "/v1/artifacts", body: hello})
	body, _ := json.Marshal(report.RunRequest{ProgramRef: prog, InputRefs: []asl.Reference{a, a}})
	if r := outlastIdleTimeout(t, s, call{method: "POST", path: "/v1/pel/run", body: body}); r.status != 200 || !strings.Contains(string(r.body), `"status":"OK"`) {
		t.Fatalf("run after waiting: %d %s", r.status, r.body)
	}
}
