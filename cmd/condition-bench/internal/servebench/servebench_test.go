package servebench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestParseVmRSS(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"Name:\tx\nVmPeak:\t  900 kB\nVmRSS:\t   1234 kB\nThreads: 3\n", 1234 << 10, true},
		{"VmRSS: 0 kB", 0, true},
		{"Name: x\n", 0, false},
		{"VmRSS: 12 MB\n", 0, false},
		{"VmRSS: x kB\n", 0, false},
	} {
		got, ok := parseVmRSS([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseVmRSS(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
	if rss, ok := RSS(); ok && rss <= 0 {
		t.Errorf("RSS = %d", rss)
	}
}

func TestParseStatBusy(t *testing.T) {
	got, ok := parseStatBusy([]byte("cpu  100 5 20 900 7 1 2 3 0 0\ncpu0 50 2 10 450 3 0 1 1 0 0\n"))
	if want := 131 * 10 * time.Millisecond; !ok || got != want {
		t.Errorf("parseStatBusy = %v, %v; want %v", got, ok, want)
	}
	for _, in := range []string{"", "cpu0 1 2 3 4 5 6 7 8\n", "cpu 1 2 3\n", "cpu 1 2 x 4 5 6 7 8\n"} {
		if _, ok := parseStatBusy([]byte(in)); ok {
			t.Errorf("parseStatBusy(%q): ok", in)
		}
	}
	if b, ok := MachineBusy(); ok && b <= 0 {
		t.Errorf("MachineBusy = %v", b)
	}
}

func TestQuantile(t *testing.T) {
	var r Result
	if r.Quantile(0.5) != 0 {
		t.Error("no latencies: want 0")
	}
	for i := 1; i <= 100; i++ {
		r.Latencies = append(r.Latencies, time.Duration(i))
	}
	for q, want := range map[float64]time.Duration{0.5: 50, 0.9: 90, 0.99: 99, 1: 100, 0.001: 1} {
		if got := r.Quantile(q); got != want {
			t.Errorf("Quantile(%v) = %v, want %v", q, got, want)
		}
	}
}

func TestHistogram(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "x_size", Help: "x"}, []string{"queue"})
	reg.MustRegister(h, prometheus.NewCounter(prometheus.CounterOpts{Name: "c_total", Help: "c"}))
	h.WithLabelValues("image").Observe(8)
	h.WithLabelValues("image").Observe(2)
	h.WithLabelValues("text").Observe(5)
	sum, n, err := Histogram(reg, "x_size", "queue", "image")
	if err != nil || sum != 10 || n != 2 {
		t.Errorf("image: %v %v %v; want 10 2", sum, n, err)
	}
	if sum, n, _ = Histogram(reg, "x_size"); sum != 15 || n != 3 {
		t.Errorf("all: %v %v; want 15 3", sum, n)
	}
	if sum, n, _ = Histogram(reg, "missing"); sum != 0 || n != 0 {
		t.Errorf("missing: %v %v", sum, n)
	}
	if _, _, err = Histogram(reg, "c_total"); err == nil {
		t.Error("a counter: no error")
	}
	if _, _, err = Histogram(reg, "x_size", "queue"); err == nil {
		t.Error("odd labels: no error")
	}
}

// TestRun counts the answers of a server that refuses every third request
// with 429 (Retry-After 0 so the test does not wait), and checks the window
// of a timed run.
func TestRun(t *testing.T) {
	var n atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if string(b) != `{"x":1}` || r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Authorization") != "Bearer t" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if n.Add(1)%3 == 0 {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer ts.Close()
	marks := 0
	l := Load{URL: ts.URL, Body: []byte(`{"x":1}`), ContentType: "application/json", Header: http.Header{"Authorization": {"Bearer t"}},
		Clients: 4, Requests: 30, Window: func(bool) { marks++ }}
	r, err := Run(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	if r.Sent != 30 || r.OK != 20 || r.Status[429] != 10 || r.Errors() != 10 || r.Counted != 20 || len(r.Latencies) != 20 || marks != 2 {
		t.Errorf("requests: %+v, %d marks", r, marks)
	}
	if r.PerSec() <= 0 || r.Quantile(0.5) <= 0 || r.Quantile(0.5) > r.Quantile(0.99) {
		t.Errorf("rate %v, p50 %v, p99 %v", r.PerSec(), r.Quantile(0.5), r.Quantile(0.99))
	}

	l.Requests, l.Warmup, l.Duration, marks = 0, 50*time.Millisecond, 100*time.Millisecond, 0
	r, err = Run(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	if r.Window != 100*time.Millisecond || r.Counted > r.OK || r.Sent != r.OK+r.Errors() || marks != 2 || r.Counted == 0 {
		t.Errorf("timed: %+v, %d marks", r, marks)
	}

	if _, err := Run(context.Background(), Load{URL: ts.URL, Clients: 0, Requests: 1}); err == nil {
		t.Error("0 clients: no error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, Load{URL: ts.URL, Clients: 1, Duration: time.Second}); err == nil {
		t.Error("cancelled: no error")
	}
}
