package cputime

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// Fields 14 and 15 (utime, stime) are 250 and 31 ticks: 2.81 s.
	const tail = " S 1 2 3 0 -1 4194560 5000 0 3 0 250 31 0 0 20 0 9 0 100 1000000 300 18446744073709551615"
	for _, tc := range []struct {
		name string
		stat string
		want time.Duration
		ok   bool
	}{
		{"plain", "1234 (condition)" + tail, 2810 * time.Millisecond, true},
		{"name with spaces and parentheses", "1234 (a) b (c)" + tail, 2810 * time.Millisecond, true},
		{"no parenthesis", "1234 condition" + tail, 0, false},
		{"truncated", "1234 (condition) S 1 2 3", 0, false},
		{"not a number", "1234 (condition) S 1 2 3 0 -1 4194560 5000 0 3 0 x 31 0", 0, false},
		{"empty", "", 0, false},
	} {
		got, ok := parseStatCPU([]byte(tc.stat))
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: parseStatCPU = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	// Fields 16 and 17 (cutime, cstime) are 0 and 0 in tail; 120 and 7 here.
	const children = " S 1 2 3 0 -1 4194560 5000 0 3 0 250 31 120 7 20 0 9 0"
	if got, ok := parseStatFields([]byte("1234 (condition)"+children), 13); got != 1270*time.Millisecond || !ok {
		t.Errorf("children: parseStatFields = %v, %v; want 1.27s, true", got, ok)
	}
}

// TestChildren: a child that spins for a while and is waited for adds its
// CPU time to Children, not to Process.
func TestChildren(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Children reads /proc/self/stat, which only Linux has")
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to run as a child")
	}
	c0, ok := Children()
	if !ok {
		t.Fatal("Children: /proc/self/stat unreadable on Linux")
	}
	p0, _ := Process()
	// About 0.2-1 s of CPU in the shell's arithmetic loop.
	cmd := exec.Command(sh, "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	c1, _ := Children()
	p1, _ := Process()
	child := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if got := c1 - c0; got < child-20*time.Millisecond || got > child+20*time.Millisecond || got < 50*time.Millisecond {
		t.Errorf("Children grew by %v; the child used %v (rusage)", got, child)
	}
	if p1-p0 > (c1-c0)/2 {
		t.Errorf("Process grew by %v while the child ran %v: the child's time counted as the parent's", p1-p0, c1-c0)
	}
}

func TestProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Process reads /proc/self/stat, which only Linux has")
	}
	a, ok := Process()
	if !ok {
		t.Fatal("Process: /proc/self/stat unreadable on Linux")
	}
	spinUntil(t, "Process", Process, a, 50*time.Millisecond) // 5 ticks
	self := func() (time.Duration, bool) { return PID(os.Getpid()) }
	b, ok := self()
	if !ok {
		t.Fatal("PID: /proc/<own pid>/stat unreadable on Linux")
	}
	spinUntil(t, "PID", self, b, 50*time.Millisecond)
	if _, ok := PID(-1); ok {
		t.Error("PID(-1) read a CPU time")
	}
}

// spinUntil busy-loops until clock reports at least d more than from. On a
// loaded machine that takes longer in wall time, so only a generous
// deadline fails it.
func spinUntil(t *testing.T, name string, clock func() (time.Duration, bool), from, d time.Duration) {
	t.Helper()
	x, deadline := 1.0, time.Now().Add(30*time.Second)
	for {
		for i := 0; i < 100000; i++ {
			x = x*1.0000001 + 1e-9
		}
		now, ok := clock()
		if !ok || now < from {
			t.Fatalf("%s went from %v to %v, %v", name, from, now, ok)
		}
		if now-from >= d {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s grew by only %v over 30 s of busy loop (x=%g)", name, now-from, x)
		}
	}
}

// TestThread checks what the encoder's share rests on: Thread counts
// the calling thread's work and not another thread's.
func TestThread(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Thread reads CLOCK_THREAD_CPUTIME_ID, which this package reads on Linux only")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	a, ok := Thread()
	if !ok {
		t.Fatal("Thread: unreadable on Linux")
	}
	// Another goroutine (another thread) busy for 100 ms of wall time while
	// this thread sleeps.
	stop := make(chan struct{})
	done := make(chan float64)
	go func() {
		x := 1.0
		for {
			select {
			case <-stop:
				done <- x
				return
			default:
			}
			for i := 0; i < 10000; i++ {
				x = x*1.0000001 + 1e-9
			}
		}
	}()
	time.Sleep(100 * time.Millisecond)
	close(stop)
	<-done
	b, _ := Thread()
	if b-a > 30*time.Millisecond {
		t.Errorf("Thread grew by %v while this thread slept and another worked; it counts other threads", b-a)
	}
	spinUntil(t, "Thread", Thread, b, 50*time.Millisecond) // this thread busy
}

func TestCounter(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Counter reads thread CPU time, which this package reads on Linux only")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var c Counter
	boom := errors.New("boom")
	busy := func() error {
		a, _ := Thread()
		spinUntil(t, "Thread", Thread, a, 20*time.Millisecond)
		return boom
	}
	if err := c.Run(busy); err != boom {
		t.Errorf("Run returned %v, want fn's error", err)
	}
	if err := c.Run(func() error { time.Sleep(50 * time.Millisecond); return nil }); err != nil {
		t.Errorf("Run returned %v, want nil", err)
	}
	if got := c.Total(); got < 20*time.Millisecond || got > 40*time.Millisecond {
		t.Errorf("Total = %v after 20 ms of work and 50 ms of sleep, want 20–40 ms", got)
	}
	c.failed.Store(true)
	if got := c.Total(); got != 0 {
		t.Errorf("Total = %v with a failed reading, want 0 (unknown)", got)
	}
	c.Reset()
	if got := c.Total(); got != 0 || c.failed.Load() {
		t.Errorf("after Reset: total %v, failed %v; want 0, false", got, c.failed.Load())
	}
}

// TestWithCounter: the counter a context carries is the one put in, and a
// context without one carries none.
func TestWithCounter(t *testing.T) {
	var c Counter
	ctx := WithCounter(context.Background(), &c)
	if got := FromContext(ctx); got != &c {
		t.Errorf("FromContext = %p, want %p", got, &c)
	}
	if got := FromContext(context.Background()); got != nil {
		t.Errorf("FromContext of a bare context = %p, want nil", got)
	}
}
