package serve

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the server's Prometheus series.
type metrics struct {
	requests    *prometheus.CounterVec   // by route and code
	latency     *prometheus.HistogramVec // by route
	inFlight    prometheus.Gauge
	batchSize   *prometheus.HistogramVec // by queue: image, text
	queueDepth  *prometheus.GaugeVec     // by queue
	cacheHits   prometheus.Counter
	cacheMisses prometheus.Counter
	cacheSize   func() int
}

func newMetrics(reg *prometheus.Registry) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "condition_http_requests_total", Help: "HTTP requests answered, by route and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "condition_http_request_duration_seconds", Help: "Time to answer a request, by route.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"route"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "condition_http_requests_in_flight", Help: "Requests being answered.",
		}),
		batchSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "condition_batch_size", Help: "Items per encoder call, by queue (image, text).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
		}, []string{"queue"}),
		queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "condition_queue_depth", Help: "Items waiting for an encoder, by queue (image, text).",
		}, []string{"queue"}),
		cacheHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "condition_prompt_cache_hits_total", Help: "Prompts found prepared in the cache.",
		}),
		cacheMisses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "condition_prompt_cache_misses_total", Help: "Prompts encoded and prepared because the cache lacked them.",
		}),
	}
	size := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "condition_prompt_cache_entries", Help: "Prepared prompts held in the cache.",
	}, func() float64 {
		if m.cacheSize == nil {
			return 0
		}
		return float64(m.cacheSize())
	})
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.inFlight, m.batchSize, m.queueDepth, m.cacheHits, m.cacheMisses, size} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
