// Package cputime reads the CPU time of this process and of the calling
// thread, for benchmarks that set an encoder's share of the CPU beside its
// rate.
package cputime

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

// Process returns the user plus system CPU time of this process, all its
// threads, from /proc/self/stat (Linux; false elsewhere). The kernel reports
// it in USER_HZ ticks, 100 a second on every Linux ABI, so it is exact to
// 10 ms: measure seconds, not single images.
func Process() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, false
	}
	return parseStatCPU(b)
}

// PID is Process for another process, from /proc/PID/stat: a server a
// benchmark runs beside the work it measures.
func PID(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return parseStatCPU(b)
}

// Children returns the user plus system CPU time of this process's
// children that have ended and been waited for (cutime and cstime of
// /proc/self/stat; Linux; false elsewhere): the programs a job runs, such as
// ffmpeg decoding a video, whose CPU Process does not count.
func Children() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, false
	}
	return parseStatFields(b, 13)
}

// parseStatCPU reads utime and stime (fields 14 and 15) from the text of
// /proc/PID/stat. The command name (field 2) is in parentheses and may
// hold spaces and parentheses itself, so fields are counted from the last ')'.
func parseStatCPU(b []byte) (time.Duration, bool) { return parseStatFields(b, 11) }

// parseStatFields adds the two tick counts at f[i] and f[i+1], f[0] being
// field 3 of /proc/PID/stat (utime and stime at 11, cutime and cstime at 13).
func parseStatFields(b []byte, i int) (time.Duration, bool) {
	j := bytes.LastIndexByte(b, ')')
	if j < 0 {
		return 0, false
	}
	f := bytes.Fields(b[j+1:]) // f[0] is field 3 (state)
	if len(f) < i+2 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(string(f[i]), 10, 64)
	s, err2 := strconv.ParseInt(string(f[i+1]), 10, 64)
	if err1 != nil || err2 != nil || u < 0 || s < 0 {
		return 0, false
	}
	const tick = time.Second / 100 // USER_HZ
	return time.Duration(u+s) * tick, true
}

// Counter adds up the CPU time of calls, each read on its calling thread;
// the callers lock their goroutines to their threads
// (runtime.LockOSThread). The zero Counter is ready to use.
type Counter struct {
	ns     atomic.Int64
	failed atomic.Bool // a thread's CPU time could not be read
}

// Run runs fn and adds the CPU time its thread spent in it.
func (c *Counter) Run(fn func() error) error {
	t0, ok0 := Thread()
	err := fn()
	t1, ok1 := Thread()
	if ok0 && ok1 {
		c.ns.Add(int64(t1 - t0))
	} else {
		c.failed.Store(true)
	}
	return err
}

// Reset forgets what was counted.
func (c *Counter) Reset() { c.ns.Store(0); c.failed.Store(false) }

// Total is the CPU time added up, 0 when any reading failed.
func (c *Counter) Total() time.Duration {
	if c.failed.Load() {
		return 0
	}
	return time.Duration(c.ns.Load())
}

// counterKey is the context key of WithCounter.
type counterKey struct{}

// WithCounter returns a copy of ctx that carries c: a batch job run with it
// adds the CPU time of its vision encoder calls to c (see Counter).
func WithCounter(ctx context.Context, c *Counter) context.Context {
	return context.WithValue(ctx, counterKey{}, c)
}

// FromContext returns the Counter ctx carries, or nil.
func FromContext(ctx context.Context) *Counter {
	c, _ := ctx.Value(counterKey{}).(*Counter)
	return c
}
