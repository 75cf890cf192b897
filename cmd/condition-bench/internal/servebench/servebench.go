// Package servebench drives an HTTP endpoint with a fixed number of
// concurrent clients and reads what a load test of condition's service
// needs beside the answers: a histogram of the server's Prometheus
// registry, the process's resident memory and its goroutines
// (condition-bench serve).
package servebench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/conditionhq/condition/internal/cputime"
)

// Load is one load test: Clients goroutines each send the same POST, one
// request at a time (a closed loop: a client sends its next request when
// the last one is answered), until Requests have been sent in all or, when
// Requests is 0, until Warmup + Duration have passed.
type Load struct {
	// Client sends the requests (nil: NewClient(Clients)).
	Client *http.Client
	// URL, Body and ContentType make each request; Header is added to it.
	URL         string
	Body        []byte
	ContentType string
	Header      http.Header

	Clients  int
	Requests int
	// Warmup is the time the clients run before the measured window of
	// Duration starts (Requests == 0 only): requests answered in it are
	// counted in Result.Sent and Result.Status, not in the rate or the
	// latencies; so are those answered after the window.
	Warmup   time.Duration
	Duration time.Duration

	// Window, when set, is called when the measured window starts
	// (end false) and when it ends (end true), for the caller to read its
	// own figures over the same seconds.
	Window func(end bool)
}

// Result is what a Load measured.
type Result struct {
	Clients int
	// Sent counts every request sent (warm-up and drain included), OK
	// those answered 200, Status the others by status code; Transport
	// counts requests that got no answer (connection errors), and
	// FirstError describes the first request that failed either way.
	Sent       int
	OK         int
	Status     map[int]int
	Transport  int
	FirstError string
	// Counted is the number of 200 answers inside the measured window
	// (all of them when Requests was set), Window its length (from the
	// first request to the last answer when Requests was set) and
	// Latencies theirs, sorted.
	Counted   int
	Window    time.Duration
	Latencies []time.Duration
	// CPU is the process's CPU time (every thread) over the window, and
	// MachineBusy the CPU time all of the machine's cores spent on any
	// process over it (the rest of it is other programs' load); 0 where
	// they cannot be read.
	CPU         time.Duration
	MachineBusy time.Duration
}

// PerSec is the rate of 200 answers in the window, per second.
func (r *Result) PerSec() float64 {
	if r.Window <= 0 {
		return 0
	}
	return float64(r.Counted) / r.Window.Seconds()
}

// Quantile returns the q-quantile (0 < q ≤ 1) of the latencies by nearest
// rank: the smallest latency with at least a q share of them at or below
// it (0 when there are none).
func (r *Result) Quantile(q float64) time.Duration {
	n := len(r.Latencies)
	if n == 0 {
		return 0
	}
	k := int(math.Ceil(q*float64(n))) - 1
	return r.Latencies[min(max(k, 0), n-1)]
}

// Errors is the number of requests that failed: answered with a status
// other than 200, or not answered.
func (r *Result) Errors() int {
	n := r.Transport
	for _, c := range r.Status {
		n += c
	}
	return n
}

// NewClient returns an HTTP client for a load of clients concurrent
// requests to one host: it keeps that many idle connections (so that every
// client reuses its own), asks for no compression and gives up on a
// request after two minutes.
func NewClient(clients int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = max(clients, 1)
	t.MaxIdleConnsPerHost = max(clients, 1)
	t.DisableCompression = true
	return &http.Client{Transport: t, Timeout: 2 * time.Minute}
}

// Run runs the load and returns what it measured. It stops early, with
// ctx's error, when ctx is done.
func Run(ctx context.Context, l Load) (*Result, error) {
	if l.Clients < 1 {
		return nil, fmt.Errorf("servebench: %d clients", l.Clients)
	}
	if l.Requests <= 0 && l.Duration <= 0 {
		return nil, errors.New("servebench: neither a request count nor a duration")
	}
	client := l.Client
	if client == nil {
		client = NewClient(l.Clients)
	}
	req0, err := http.NewRequest(http.MethodPost, l.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("servebench: %w", err)
	}

	// The window: the whole run with Requests, else [Warmup, Warmup+Duration].
	start := time.Now()
	winStart, winEnd := start, time.Time{}
	stopAt := time.Time{}
	if l.Requests <= 0 {
		winStart = start.Add(l.Warmup)
		winEnd = winStart.Add(l.Duration)
		stopAt = winEnd
	}
	var cpu0, busy0, cpu1, busy1 time.Duration
	var cpuOK, busyOK bool
	read0 := func() {
		cpu0, cpuOK = cputime.Process()
		busy0, busyOK = MachineBusy()
	}
	read1 := func() {
		var ok bool
		if cpu1, ok = cputime.Process(); !ok {
			cpuOK = false
		}
		if busy1, ok = MachineBusy(); !ok {
			busyOK = false
		}
	}
	mark := func(end bool) {
		if l.Window != nil {
			l.Window(end)
		}
	}
	winDone := make(chan struct{})
	if l.Requests <= 0 {
		go func() {
			defer close(winDone)
			t := time.NewTimer(time.Until(winStart))
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
			mark(false)
			read0()
			t.Reset(time.Until(winEnd))
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
			read1()
			mark(true)
		}()
	} else {
		mark(false)
		read0()
		close(winDone)
	}

	type sample struct {
		done    time.Time
		latency time.Duration
	}
	var (
		mu      sync.Mutex
		res     = &Result{Clients: l.Clients, Status: map[int]int{}}
		samples []sample
		sent    int
	)
	// take reserves the next request, false when the run is over.
	take := func() bool {
		mu.Lock()
		defer mu.Unlock()
		if ctx.Err() != nil {
			return false
		}
		if l.Requests > 0 {
			if sent >= l.Requests {
				return false
			}
		} else if !time.Now().Before(stopAt) {
			return false
		}
		sent++
		return true
	}
	var wg sync.WaitGroup
	for range l.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for take() {
				t0 := time.Now()
				status, retry, err := send(ctx, client, req0, l)
				t1 := time.Now()
				mu.Lock()
				res.Sent++
				switch {
				case err != nil:
					res.Transport++
					if res.FirstError == "" {
						res.FirstError = err.Error()
					}
				case status == http.StatusOK:
					res.OK++
					samples = append(samples, sample{done: t1, latency: t1.Sub(t0)})
				default:
					res.Status[status]++
					if res.FirstError == "" {
						res.FirstError = fmt.Sprintf("status %d", status)
					}
				}
				mu.Unlock()
				if retry > 0 {
					// A well-behaved client waits as Retry-After says
					// (429, 503), within the run.
					if !stopAt.IsZero() {
						retry = min(retry, time.Until(stopAt))
					}
					sleep(ctx, retry)
				}
			}
		}()
	}
	wg.Wait()
	end := time.Now()
	if l.Requests > 0 {
		read1()
		mark(true)
	}
	<-winDone
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cpuOK {
		res.CPU = cpu1 - cpu0
	}
	if busyOK {
		res.MachineBusy = busy1 - busy0
	}
	if l.Requests > 0 {
		res.Window = end.Sub(start)
		for _, s := range samples {
			res.Latencies = append(res.Latencies, s.latency)
		}
	} else {
		res.Window = l.Duration
		for _, s := range samples {
			if !s.done.Before(winStart) && !s.done.After(winEnd) {
				res.Latencies = append(res.Latencies, s.latency)
			}
		}
	}
	res.Counted = len(res.Latencies)
	slices.Sort(res.Latencies)
	return res, nil
}

// send makes one request and reads its answer to the end; retry is the
// answer's Retry-After, when it has one.
func send(ctx context.Context, c *http.Client, req0 *http.Request, l Load) (status int, retry time.Duration, err error) {
	req := req0.Clone(ctx)
	req.Body = io.NopCloser(bytes.NewReader(l.Body))
	req.ContentLength = int64(len(l.Body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(l.Body)), nil }
	for k, v := range l.Header {
		req.Header[k] = v
	}
	if l.ContentType != "" {
		req.Header.Set("Content-Type", l.ContentType)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, 0, fmt.Errorf("reading the answer: %w", err)
	}
	if s, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); err == nil && s > 0 {
		retry = time.Duration(s) * time.Second
	}
	return resp.StatusCode, retry, nil
}

func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// Histogram returns the sample sum and count of the histogram called name
// in g whose labels include those given (name=value pairs), added up over
// every series that matches; zeros when there is none.
func Histogram(g prometheus.Gatherer, name string, labels ...string) (sum float64, count uint64, err error) {
	if len(labels)%2 != 0 {
		return 0, 0, errors.New("servebench: labels must come in name, value pairs")
	}
	mfs, err := g.Gather()
	if err != nil {
		return 0, 0, fmt.Errorf("servebench: gathering metrics: %w", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for i := 0; i < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
						break
					}
				}
				if !found {
					continue series
				}
			}
			h := m.GetHistogram()
			if h == nil {
				return 0, 0, fmt.Errorf("servebench: %s is not a histogram", name)
			}
			sum += h.GetSampleSum()
			count += h.GetSampleCount()
		}
	}
	return sum, count, nil
}

// RSS returns the resident set size of this process in bytes, read from
// /proc/self/status (VmRSS; Linux only, false elsewhere).
func RSS() (int64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	return parseVmRSS(b)
}

// parseVmRSS reads the VmRSS line of /proc/PID/status ("VmRSS:  1234 kB").
func parseVmRSS(b []byte) (int64, bool) {
	for line := range strings.SplitSeq(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 {
			return 0, false
		}
		return kb << 10, true
	}
	return 0, false
}

// MachineBusy returns the CPU time all cores of the machine have spent
// on anything but idling since boot, from /proc/stat (Linux; false
// elsewhere): user, nice, system, irq, softirq and steal, in USER_HZ
// ticks of 10 ms.
func MachineBusy() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	return parseStatBusy(b)
}

// parseStatBusy reads the first ("cpu ") line of /proc/stat.
func parseStatBusy(b []byte) (time.Duration, bool) {
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, false
	}
	var busy int64
	for i, v := range f[1:9] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, false
		}
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	const tick = time.Second / 100 // USER_HZ
	return time.Duration(busy) * tick, true
}

// Settle waits until the process has at most want goroutines or timeout
// has passed, and returns the count it last saw: goroutines that serve
// connections and requests end a little after their clients leave.
func Settle(want int, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	for {
		n := runtime.NumGoroutine()
		if n <= want || !time.Now().Before(deadline) {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}
