package server

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/amduat/amduat/plan"
)

// metrics are the server's Prometheus series (SPECS.md §18.8).
type metrics struct {
	requests *prometheus.CounterVec   // route, method, code
	latency  *prometheus.HistogramVec // route, code
	bytesIn  *prometheus.CounterVec   // route
	bytesOut *prometheus.CounterVec   // route
	puts     prometheus.Counter
	putBytes prometheus.Counter
	gets     prometheus.Counter
	getBytes prometheus.Counter
	runs     *prometheus.CounterVec // status
	cache    *prometheus.CounterVec // result
	// queueWait is the time each admitted run or replay waited for a slot
	// (0 when one was free); queueRefused counts the refused ones by
	// reason: full (429) or timeout (503).
	queueWait    prometheus.Histogram
	queueRefused *prometheus.CounterVec
	// The plan workers' series (SPECS.md §18.12): events this server
	// appended by type, the step states they led to, the error classes of
	// failed attempts, and background runs by how they ended.
	planEvents   *prometheus.CounterVec // type
	planSteps    *prometheus.CounterVec // state
	planFailures *prometheus.CounterVec // class
	planRuns     *prometheus.CounterVec // outcome
}

func newMetrics(reg *prometheus.Registry, q *runQueue) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "amduat_http_requests_total",
			Help: "HTTP requests by route pattern, method and status code (0: connection aborted)."}, []string{"route", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "amduat_http_request_duration_seconds",
			Help: "HTTP request latency by route pattern and status code.", Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}, []string{"route", "code"}),
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "amduat_http_request_bytes_total",
			Help: "Request body bytes read, by route pattern."}, []string{"route"}),
		bytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "amduat_http_response_bytes_total",
			Help: "Response body bytes written, by route pattern."}, []string{"route"}),
		puts:     prometheus.NewCounter(prometheus.CounterOpts{Name: "amduat_store_puts_total", Help: "Artifacts put (single and batched)."}),
		putBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "amduat_store_put_bytes_total", Help: "Payload bytes put."}),
		gets:     prometheus.NewCounter(prometheus.CounterOpts{Name: "amduat_store_gets_total", Help: "Artifacts served (GET)."}),
		getBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "amduat_store_get_bytes_total", Help: "Payload bytes served."}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "amduat_runs_total",
			Help: "Program runs by execution status (error: no result, an operational failure)."}, []string{"status"}),
		cache: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "amduat_run_cache_total",
			Help: "Action-cache outcomes of runs: hit, miss or off."}, []string{"result"}),
		queueWait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "amduat_run_queue_wait_seconds",
			Help: "Time admitted runs and replays waited for a run slot (0: a slot was free).", Buckets: prometheus.ExponentialBuckets(0.001, 4, 9)}),
		queueRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "amduat_run_queue_refused_total",
			Help: "Runs and replays refused: full (the run queue was full, 429) or timeout (no slot within the queue wait, 503)."}, []string{"reason"}),
		planEvents: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "amduat_plan_events_total",
			Help: "Plan ledger events this server appended, by event type."}, []string{"type"}),
		planSteps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "amduat_plan_step_transitions_total",
			Help: "Step transitions this server recorded, by the state the step entered."}, []string{"state"}),
		planFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "amduat_plan_step_failures_total",
			Help: "Failed effect attempts and steps this server recorded, by error class."}, []string{"class"}),
		planRuns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "amduat_plan_runs_total",
			Help: "Background runs of executions by how they ended: the execution's status, lease_held (another runner drives it), lease_lost or error."}, []string{"outcome"}),
	}
	active := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "amduat_runs_active", Help: "Runs and replays in progress."}, func() float64 { return float64(q.running()) })
	queued := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "amduat_run_queue_length", Help: "Runs and replays waiting for a run slot."}, func() float64 { return float64(q.queued()) })
	capacity := prometheus.NewGauge(prometheus.GaugeOpts{Name: "amduat_run_queue_capacity", Help: "Most runs and replays that may wait for a slot (serve --run-queue)."})
	capacity.Set(float64(q.depth))
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.bytesIn, m.bytesOut, m.puts, m.putBytes, m.gets, m.getBytes, m.runs, m.cache, active, m.queueWait, m.queueRefused, queued, capacity, m.planEvents, m.planSteps, m.planFailures, m.planRuns} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// The process and Go runtime collectors are registered once per
	// registry; a caller-supplied registry may have them already.
	for _, c := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			if _, ok := err.(prometheus.AlreadyRegisteredError); !ok {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *metrics) observe(route, method, code string, d time.Duration, in, out int64) {
	m.requests.WithLabelValues(route, method, code).Inc()
	m.latency.WithLabelValues(route, code).Observe(d.Seconds())
	m.bytesIn.WithLabelValues(route).Add(float64(in))
	m.bytesOut.WithLabelValues(route).Add(float64(out))
}

// planEvent counts an event this server's runner appended.
func (m *metrics) planEvent(ev plan.Event) {
	m.planEvents.WithLabelValues(ev.Type.String()).Inc()
	if st, ok := plan.StepStateAfter(ev); ok {
		m.planSteps.WithLabelValues(st.String()).Inc()
	}
	if ev.ErrorClass != 0 {
		m.planFailures.WithLabelValues(ev.ErrorClass.String()).Inc()
	}
}

func promHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
