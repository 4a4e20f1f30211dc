package server

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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
	}
	active := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "amduat_runs_active", Help: "Runs and replays in progress."}, func() float64 { return float64(q.running()) })
	queued := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "amduat_run_queue_length", Help: "Runs and replays waiting for a run slot."}, func() float64 { return float64(q.queued()) })
	capacity := prometheus.NewGauge(prometheus.GaugeOpts{Name: "amduat_run_queue_capacity", Help: "Most runs and replays that may wait for a slot (serve --run-queue)."})
	capacity.Set(float64(q.depth))
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.bytesIn, m.bytesOut, m.puts, m.putBytes, m.gets, m.getBytes, m.runs, m.cache, active, m.queueWait, m.queueRefused, queued, capacity} {
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

func promHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
