package xattn

import (
	"sync"
	"sync/atomic"
)

// task is one parallel phase: run(i, w) does item i on worker w.
type task interface{ run(i, w int) }

// pool runs n items of a task on up to threads goroutines (the caller is
// worker 0). Workers start on first use and stop on close. do itself does
// not allocate.
type pool struct {
	threads int
	wake    []chan struct{}
	wg      sync.WaitGroup
	t       task
	n       int
	next    atomic.Int64
	started bool
	closed  bool
	mu      sync.Mutex // guards started/closed against close from a cleanup
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
	p.t, p.n = t, n
	p.next.Store(0)
	k := min(p.threads, n) - 1
	p.wg.Add(k)
	for w := 1; w <= k; w++ {
		p.wake[w] <- struct{}{}
	}
	p.loop(0)
	p.wg.Wait()
	p.t = nil
}

func (p *pool) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.closed {
		return
	}
	p.started = true
	p.wake = make([]chan struct{}, p.threads)
	for w := 1; w < p.threads; w++ {
		p.wake[w] = make(chan struct{}, 1)
		go p.worker(w)
	}
}

func (p *pool) worker(w int) {
	for range p.wake[w] {
		p.loop(w)
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
	if p.started {
		for w := 1; w < p.threads; w++ {
			close(p.wake[w])
		}
	}
}
