package plan

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/plan/effect"
)

// testClock is a Clock whose Sleep advances Now at once: backoffs are
// decided, recorded and passed without waiting.
type testClock struct {
	mu    sync.Mutex
	now   time.Time
	slept time.Duration
}

func newTestClock() *testClock {
	return &testClock{now: time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)}
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.slept += d
	return nil
}

// service is a loopback HTTP service that counts calls per idempotency
// key. A key with a script answers its calls in order with the script's
// entries: "ok", "503", "429:SECONDS" (Retry-After), "hang" (no answer
// until the client gives up), "400", "403". A path /dedupe/ remembers the
// first successful answer of a key and repeats it for the key's later
// calls, as a provider that honours Idempotency-Key does; "effects"
// counts the calls that changed its world (every successful one on other
// paths, the first successful one of a key on /dedupe/).
type service struct {
	mu      sync.Mutex
	calls   map[string]int
	effects map[string]int
	answers map[string][]byte
	script  map[string][]string
	// onCall, if set, runs before the answer is written (a crash test
	// kills its child there).
	onCall func(key string, n int)
	srv    *http.Server
	url    string
}

func startService(t testing.TB) *service {
	s := &service{calls: map[string]int{}, effects: map[string]int{}, answers: map[string][]byte{}, script: map[string][]string{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.srv = &http.Server{Handler: s}
	go s.srv.Serve(ln)
	s.url = "http://" + ln.Addr().String()
	t.Cleanup(func() { s.srv.Close() })
	return s
}

func (s *service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.calls[key]++
	n := s.calls[key]
	act := "ok"
	if sc := s.script[key]; n <= len(sc) {
		act = sc[n-1]
	}
	dedupe := strings.HasPrefix(r.URL.Path, "/dedupe/")
	prev, seen := s.answers[key]
	onCall := s.onCall
	s.mu.Unlock()
	if onCall != nil {
		onCall(key, n)
	}
	switch {
	case act == "hang":
		<-r.Context().Done()
		return
	case strings.HasPrefix(act, "429"):
		secs, _ := strings.CutPrefix(act, "429:")
		w.Header().Set("Retry-After", secs)
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintf(w, "scripted %s", act)
		return
	case act != "ok":
		code, _ := strconv.Atoi(act)
		w.WriteHeader(code)
		fmt.Fprintf(w, "scripted %s", act)
		return
	}
	if dedupe && seen {
		w.Write(prev)
		return
	}
	ans := []byte(fmt.Sprintf("done %s %s len=%d", r.URL.Path, key, len(body)))
	s.mu.Lock()
	s.effects[key]++
	if dedupe {
		s.answers[key] = ans
	}
	s.mu.Unlock()
	w.Write(ans)
}

func (s *service) count(key string) (calls, effects int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[key], s.effects[key]
}

func (s *service) setScript(key string, acts ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script[key] = acts
}

// testExec is an effect executor over the loopback service: params are
// {"path": "/x"}; it POSTs the concatenated input bytes with the key as
// Idempotency-Key and stores the answer as output "body".
type testExec struct {
	name, version string
	url           string
	honours       bool
	mu            sync.Mutex
	calls         int
}

func (e *testExec) Name() string      { return e.name }
func (e *testExec) Version() string   { return e.version }
func (e *testExec) HonoursKeys() bool { return e.honours }

func (e *testExec) Call(ctx context.Context, st effect.Store, req effect.Request) (effect.Observation, error) {
	e.mu.Lock()
	e.calls++
	e.mu.Unlock()
	var body bytes.Buffer
	for _, in := range req.Inputs {
		a, err := asl.Get(ctx, st, in.Ref, 1<<20)
		if err != nil {
			return effect.Observation{}, &effect.Error{Class: effect.InvalidInput, Msg: err.Error()}
		}
		body.Write(a.Bytes)
	}
	path := strings.TrimSuffix(strings.TrimPrefix(string(req.Params), `{"path":"`), `"}`)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url+path, &body)
	if err != nil {
		return effect.Observation{}, &effect.Error{Class: effect.InvalidInput, Msg: err.Error()}
	}
	hr.Header.Set("Idempotency-Key", req.Key)
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) && ue.Timeout() {
			return effect.Observation{}, fmt.Errorf("%s: %w", err, effect.ErrUnknownOutcome)
		}
		return effect.Observation{}, &effect.Error{Class: effect.DependencyUnavailable, Msg: err.Error()}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return effect.Observation{}, fmt.Errorf("reading the answer: %v: %w", err, effect.ErrUnknownOutcome)
	}
	ref, err := asl.PutArtifact(ctx, st, asl.HashSHA256, asl.Untagged(b))
	if err != nil {
		return effect.Observation{}, err
	}
	// A failed attempt's observation holds the answer's body too, as the
	// built-in executors' do (SPECS.md §23.2): the receipt names it.
	obs := effect.Observation{Outputs: []effect.Output{{Name: "body", Ref: ref}}}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return obs, &effect.Error{Class: effect.RateLimited, RetryAfter: time.Duration(secs) * time.Second, Msg: resp.Status}
	case resp.StatusCode >= 500:
		return obs, &effect.Error{Class: effect.ProviderUnavailable, Msg: resp.Status}
	case resp.StatusCode == 401 || resp.StatusCode == 403:
		return obs, &effect.Error{Class: effect.AuthForbidden, Msg: resp.Status}
	case resp.StatusCode >= 400:
		return obs, &effect.Error{Class: effect.InvalidInput, Msg: resp.Status}
	}
	return obs, nil
}

func (e *testExec) n() int { e.mu.Lock(); defer e.mu.Unlock(); return e.calls }

// failingExec fails the test when called: replays must call nothing.
type failingExec struct {
	t       testing.TB
	name    string
	version string
}

func (e failingExec) Name() string    { return e.name }
func (e failingExec) Version() string { return e.version }
func (e failingExec) Call(context.Context, effect.Store, effect.Request) (effect.Observation, error) {
	e.t.Errorf("executor %s called during a replay", e.name)
	return effect.Observation{}, errors.New("called during a replay")
}

// memPinned is the in-memory store with pins: a map changed under a lock,
// compare-and-swap as the backends' pins are.
type memPinned struct {
	*memstore.Store
	mu   sync.Mutex
	pins map[string]asl.Reference
}

func newMemPinned() *memPinned {
	return &memPinned{Store: memstore.New(), pins: map[string]asl.Reference{}}
}

func (m *memPinned) Pin(ctx context.Context, name string, ref asl.Reference, opts asl.PinOptions) error {
	if ok, err := asl.Has(ctx, m.Store, ref); err != nil || !ok {
		return fmt.Errorf("pin %s: %s: %w", name, ref, asl.ErrNotFound)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.pins[name]; ok && cur != ref && !opts.Force {
		return fmt.Errorf("pin %s: %w", name, asl.ErrPinExists)
	}
	m.pins[name] = ref
	return nil
}

func (m *memPinned) Unpin(ctx context.Context, name string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.pins[name]
	delete(m.pins, name)
	return ok, nil
}

func (m *memPinned) Pins(ctx context.Context) ([]asl.Pin, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]asl.Pin, 0, len(m.pins))
	for n, r := range m.pins {
		out = append(out, asl.Pin{Name: n, Ref: r})
	}
	sortPins(out)
	return out, nil
}

func sortPins(ps []asl.Pin) {
	slices.SortFunc(ps, func(a, b asl.Pin) int { return strings.Compare(a.Name, b.Name) })
}

// prefixPebble gives the embedded store the PrefixPinner capability
// through its pin index space, as the command line does.
type prefixPebble struct{ *pebblestore.Store }

func (p prefixPebble) PinsWithPrefix(ctx context.Context, prefix string) ([]asl.Pin, error) {
	var out []asl.Pin
	err := p.ScanIndex(ctx, pebblestore.PinSpace, []byte(prefix), func(k, v []byte) error {
		ref, err := asl.DecodeReference(v)
		if err != nil {
			return err
		}
		out = append(out, asl.Pin{Name: string(k), Ref: ref})
		return nil
	})
	return out, err
}

func newPebble(t testing.TB, dir string) *pebblestore.Store {
	t.Helper()
	s, err := pebblestore.Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func putBytes(t testing.TB, st asl.Receiver, b string) asl.Reference {
	t.Helper()
	ref, err := asl.PutArtifact(context.Background(), st, asl.HashSHA256, asl.Untagged([]byte(b)))
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func putPlan(t testing.TB, st asl.Receiver, p *Plan) asl.Reference {
	t.Helper()
	a, err := p.Artifact()
	if err != nil {
		t.Fatal(err)
	}
	ref, err := asl.PutArtifact(context.Background(), st, asl.HashSHA256, a)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func putSeed(t testing.TB, st asl.Receiver, name string) asl.Reference {
	t.Helper()
	a, err := pel.SeedArtifact(name)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := asl.PutArtifact(context.Background(), st, asl.HashSHA256, a)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// effectStep returns an effect step calling path on the test service.
func effectStep(id, kind, path string, class effect.Class, gate Gate, cache CachePolicy, ins ...Binding) Step {
	return Step{ID: id, Kind: EffectStep, Effect: kind, EffectParams: []byte(`{"path":"` + path + `"}`), Class: class,
		Gate: gate, Cache: cache, Retry: RetryPolicy{MaxAttempts: 5, BaseMillis: 100, CapMillis: 2000}, Inputs: ins}
}

// demoPlan is the walkthrough's shape: fetch (read_only), count (PEL
// concat of the document and a suffix), post (external_send).
func demoPlan(t testing.TB, st asl.Receiver, sendGate Gate) *Plan {
	concat := putSeed(t, st, pel.SeedConcat)
	suffix := putBytes(t, st, " (counted)")
	return &Plan{Steps: []Step{
		{ID: "count", Kind: PELStep, Program: concat, Inputs: []Binding{{Name: "0", Step: "fetch", Output: "body"}, {Name: "1", Ref: suffix}}},
		effectStep("fetch", "svc", "/dedupe/fetch", effect.ReadOnly, GateNone, CacheReuse, Binding{Name: "url", Ref: putBytes(t, st, "default-url")}),
		effectStep("post", "svc", "/post", effect.ExternalSend, sendGate, CacheNone, Binding{Name: "count", Step: "count", Output: "0"}),
	}}
}
