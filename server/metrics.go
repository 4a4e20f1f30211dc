package server

import (
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/amduat/amduat/internal/metrics"
	"github.com/amduat/amduat/plan"
)

// serverMetrics are the server's series (SPECS.md §18.8).
type serverMetrics struct {
	requests *metrics.CounterVec   // route, method, code
	latency  *metrics.HistogramVec // route, code
	bytesIn  *metrics.CounterVec   // route
	bytesOut *metrics.CounterVec   // route
	puts     *metrics.Counter
	putBytes *metrics.Counter
	gets     *metrics.Counter
	getBytes *metrics.Counter
	runs     *metrics.CounterVec // status
	cache    *metrics.CounterVec // result
	// queueWait is the time each admitted run or replay waited for a slot
	// (0 when one was free); queueRefused counts the refused ones by
	// reason: full (429) or timeout (503).
	queueWait    *metrics.Histogram
	queueRefused *metrics.CounterVec
	// The plan workers' series (SPECS.md §18.12): events this server
	// appended by type, the step states they led to, the error classes of
	// failed attempts, and background runs by how they ended.
	planEvents   *metrics.CounterVec // type
	planSteps    *metrics.CounterVec // state
	planFailures *metrics.CounterVec // class
	planRuns     *metrics.CounterVec // outcome

	// perRequest caches, by requestKey, the four series observe updates
	// (*requestSeries): their lookup in the vectors formats the status
	// code and a key and takes a lock per series, on every request. A
	// series is still made by the first request that observes it, as
	// before.
	perRequest sync.Map
}

type requestKey struct {
	route, method string
	status        int
}

type requestSeries struct {
	requests, bytesIn, bytesOut *metrics.Counter
	latency                     *metrics.Histogram
}

func newMetrics(reg *metrics.Registry, q *runQueue) (*serverMetrics, error) {
	m := &serverMetrics{
		requests: metrics.NewCounterVec(metrics.Opts{Name: "amduat_http_requests_total",
			Help: "HTTP requests by route pattern, method and status code (0: connection aborted)."}, []string{"route", "method", "code"}),
		latency: metrics.NewHistogramVec(metrics.Opts{Name: "amduat_http_request_duration_seconds",
			Help: "HTTP request latency by route pattern and status code."}, metrics.ExponentialBuckets(0.0001, 4, 10), []string{"route", "code"}),
		bytesIn: metrics.NewCounterVec(metrics.Opts{Name: "amduat_http_request_bytes_total",
			Help: "Request body bytes read, by route pattern."}, []string{"route"}),
		bytesOut: metrics.NewCounterVec(metrics.Opts{Name: "amduat_http_response_bytes_total",
			Help: "Response body bytes written, by route pattern."}, []string{"route"}),
		puts:     metrics.NewCounter(metrics.Opts{Name: "amduat_store_puts_total", Help: "Artifacts put (single and batched)."}),
		putBytes: metrics.NewCounter(metrics.Opts{Name: "amduat_store_put_bytes_total", Help: "Payload bytes put."}),
		gets:     metrics.NewCounter(metrics.Opts{Name: "amduat_store_gets_total", Help: "Artifacts served (GET)."}),
		getBytes: metrics.NewCounter(metrics.Opts{Name: "amduat_store_get_bytes_total", Help: "Payload bytes served."}),
		runs: metrics.NewCounterVec(metrics.Opts{Name: "amduat_runs_total",
			Help: "Program runs by execution status (error: no result, an operational failure)."}, []string{"status"}),
		cache: metrics.NewCounterVec(metrics.Opts{Name: "amduat_run_cache_total",
			Help: "Action-cache outcomes of runs: hit, miss or off."}, []string{"result"}),
		queueWait: metrics.NewHistogram(metrics.Opts{Name: "amduat_run_queue_wait_seconds",
			Help: "Time admitted runs and replays waited for a run slot (0: a slot was free)."}, metrics.ExponentialBuckets(0.001, 4, 9)),
		queueRefused: metrics.NewCounterVec(metrics.Opts{Name: "amduat_run_queue_refused_total",
			Help: "Runs and replays refused: full (the run queue was full, 429) or timeout (no slot within the queue wait, 503)."}, []string{"reason"}),
		planEvents: metrics.NewCounterVec(metrics.Opts{Name: "amduat_plan_events_total",
			Help: "Plan ledger events this server appended, by event type."}, []string{"type"}),
		planSteps: metrics.NewCounterVec(metrics.Opts{Name: "amduat_plan_step_transitions_total",
			Help: "Step transitions this server recorded, by the state the step entered."}, []string{"state"}),
		planFailures: metrics.NewCounterVec(metrics.Opts{Name: "amduat_plan_step_failures_total",
			Help: "Failed effect attempts and steps this server recorded, by error class."}, []string{"class"}),
		planRuns: metrics.NewCounterVec(metrics.Opts{Name: "amduat_plan_runs_total",
			Help: "Background runs of executions by how they ended: the execution's status, lease_held (another runner drives it), lease_lost or error."}, []string{"outcome"}),
	}
	active := metrics.NewGaugeFunc(metrics.Opts{Name: "amduat_runs_active", Help: "Runs and replays in progress."}, func() float64 { return float64(q.running()) })
	queued := metrics.NewGaugeFunc(metrics.Opts{Name: "amduat_run_queue_length", Help: "Runs and replays waiting for a run slot."}, func() float64 { return float64(q.queued()) })
	capacity := metrics.NewGauge(metrics.Opts{Name: "amduat_run_queue_capacity", Help: "Most runs and replays that may wait for a slot (serve --run-queue)."})
	capacity.Set(float64(q.depth))
	for _, c := range []metrics.Collector{m.requests, m.latency, m.bytesIn, m.bytesOut, m.puts, m.putBytes, m.gets, m.getBytes, m.runs, m.cache, active, m.queueWait, m.queueRefused, queued, capacity, m.planEvents, m.planSteps, m.planFailures, m.planRuns} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// The process and Go runtime collectors are registered once per
	// registry; a caller-supplied registry may have them already.
	for _, c := range []metrics.Collector{metrics.NewGoCollector(), metrics.NewProcessCollector()} {
		if err := reg.Register(c); err != nil {
			if !errors.Is(err, metrics.ErrAlreadyRegistered) {
				return nil, err
			}
		}
	}
	return m, nil
}

// observe counts a request of route answered with status (0: the
// connection was cut) after d, with in and out bytes of body.
func (m *serverMetrics) observe(route, method string, status int, d time.Duration, in, out int64) {
	k := requestKey{route, method, status}
	v, ok := m.perRequest.Load(k)
	if !ok {
		code := strconv.Itoa(status)
		v, _ = m.perRequest.LoadOrStore(k, &requestSeries{
			requests: m.requests.WithLabelValues(route, method, code),
			latency:  m.latency.WithLabelValues(route, code),
			bytesIn:  m.bytesIn.WithLabelValues(route),
			bytesOut: m.bytesOut.WithLabelValues(route),
		})
	}
	rs := v.(*requestSeries)
	rs.requests.Inc()
	rs.latency.Observe(d.Seconds())
	rs.bytesIn.Add(float64(in))
	rs.bytesOut.Add(float64(out))
}

// planEvent counts an event this server's runner appended.
func (m *serverMetrics) planEvent(ev plan.Event) {
	m.planEvents.WithLabelValues(ev.Type.String()).Inc()
	if st, ok := plan.StepStateAfter(ev); ok {
		m.planSteps.WithLabelValues(st.String()).Inc()
	}
	if ev.ErrorClass != 0 {
		m.planFailures.WithLabelValues(ev.ErrorClass.String()).Inc()
	}
}

// metricsHandler serves /metrics in the text exposition format 0.0.4.
func metricsHandler(reg *metrics.Registry) http.Handler { return metrics.Handler(reg) }
