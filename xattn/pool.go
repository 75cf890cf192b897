package xattn

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// task is one parallel phase: run(i, w) does item i on worker w.
type task interface{ run(i, w int) }

// spinFor is how long an idle worker polls for the next phase before it
// parks, and how long do polls for the workers to finish before it blocks.
// A forward pass runs three or four phases back to back; waking a parked
// goroutine on another core costs tens of microseconds each time (futex
// wake-up of an idle thread, then a steal of the readied goroutine), which
// at two threads was most of what the second core lost on small phases.
const spinFor = 100 * time.Microsecond

// pool runs n items of a task on up to threads goroutines (the caller is
// worker 0). Workers start on first use and stop on close. do itself does
// not allocate.
//
// A phase is published by bumping gen; idle workers poll gen for spinFor
// and then park on their wake channel after setting their parked flag, so
// do only sends to workers that are parked (the flag's compare-and-swap
// decides who of do and the worker consumes a bump that raced the park).
type pool struct {
	threads int
	t       task
	n       int

	_       [64]byte // keep the hot counters off the fields above' line
	next    atomic.Int64
	_       [56]byte
	gen     atomic.Uint64
	_       [56]byte
	pending atomic.Int64 // workers not yet done with the current phase
	_       [56]byte

	workers []poolWorker
	wg      sync.WaitGroup // the blocking fallback of pending
	started bool
	closed  bool
	quit    atomic.Bool
	mu      sync.Mutex // guards started/closed against close from a cleanup
}

// poolWorker is one worker's parking state, on its own cache line.
type poolWorker struct {
	parked atomic.Bool
	wake   chan struct{}
	_      [48]byte
}

func newPool(threads int) *pool {
	return &pool{threads: threads}
}

func (p *pool) do(n int, t task) {
	if p.threads <= 1 || n <= 1 {
		for i := 0; i < n; i++ {
			t.run(i, 0)
		}
		return
	}
	p.start()
	// Every worker takes part (one with no item left returns at once), so
	// that no worker reads a phase's fields while the next one is set up.
	k := p.threads - 1
	p.t, p.n = t, n
	p.next.Store(0)
	p.pending.Store(int64(k))
	p.wg.Add(k)
	p.gen.Add(1)
	if afterPublish != nil {
		afterPublish()
	}
	for w := 1; w < p.threads; w++ {
		if pw := &p.workers[w]; pw.parked.CompareAndSwap(true, false) {
			pw.wake <- struct{}{}
		}
	}
	p.loop(0)
	spinUntil(func() bool { return p.pending.Load() == 0 })
	p.wg.Wait() // returns at once when pending reached 0; orders the workers' writes
	p.t = nil
}

// afterPublish, when set (by tests), runs in do between publishing a phase
// and waking the parked workers.
var afterPublish func()

// spinUntil polls cond for up to spinFor, yielding now and then so that a
// goroutine waiting for this P can run; it reports whether cond held.
func spinUntil(cond func() bool) bool {
	var start time.Time
	for i := 0; ; i++ {
		if cond() {
			return true
		}
		if i&63 == 63 {
			if start.IsZero() {
				start = time.Now()
			} else if time.Since(start) > spinFor {
				return false
			}
			runtime.Gosched()
		}
	}
}

func (p *pool) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.closed {
		return
	}
	p.started = true
	p.workers = make([]poolWorker, p.threads)
	for w := 1; w < p.threads; w++ {
		p.workers[w].wake = make(chan struct{}, 1)
		go p.worker(w, p.gen.Load())
	}
}

// worker runs the phases after seen, the generation when it was started.
//
// A wake-up is only a hint: do publishes a phase (bumps gen) before it
// wakes the parked workers, so a worker can see the phase by polling, run
// it to the end and park again before do gets to it; do then finds it
// parked and wakes it for the phase it has already done. So after every
// wake-up the worker checks gen again.
func (p *pool) worker(w int, seen uint64) {
	pw := &p.workers[w]
	fresh := func() bool { return p.gen.Load() != seen || p.quit.Load() }
	for {
		for !spinUntil(fresh) {
			pw.parked.Store(true)
			if fresh() {
				if !pw.parked.CompareAndSwap(true, false) {
					<-pw.wake // do (or close) claimed the flag and sends
				}
				break
			}
			if _, ok := <-pw.wake; !ok {
				return
			}
		}
		if p.quit.Load() {
			return
		}
		seen = p.gen.Load()
		p.loop(w)
		p.pending.Add(-1)
		p.wg.Done()
	}
}

func (p *pool) loop(w int) {
	for {
		i := int(p.next.Add(1) - 1)
		if i >= p.n {
			return
		}
		p.t.run(i, w)
	}
}

// close stops the workers; it is idempotent.
func (p *pool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	p.quit.Store(true)
	if p.started {
		for w := 1; w < p.threads; w++ {
			close(p.workers[w].wake)
		}
	}
}
